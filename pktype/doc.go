// Package pktype is promptkit's vocabulary: the values that the engine's
// internals, the job service and applications all speak. Chat messages and
// generation requests, token usage with presence, execution events and their
// failure kinds, and the error identities are defined here once; the root
// package promptkit re-exports them under the same names, and jobs stores
// them.
//
// The package is a leaf: it imports only the standard library, so any
// package may depend on it.
package pktype
