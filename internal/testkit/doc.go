// Package testkit is what the tests of promptkit's packages share, so each
// idea exists once: a fake clock (Clock), a log capture (Logs, and
// TestLogger), and waits that wake on what signals a change (Until,
// WaitFor) instead of sleeping.
//
// Two subpackages hold what needs the rest of the module: storekit runs a
// test body on every job store (Each) and counts a store's calls
// (Counting); enginekit builds engines on the simulated backend or on a
// fake provider. This package imports only the standard library, so the
// tests of any package can use it, the package's own internal tests
// included (package jobs, sqlitestore, pgstore, promptkit); storekit and
// enginekit import the stores and the library, so only external test
// packages (package x_test) of those can use them.
//
// Production code never imports testkit or its subpackages:
// TestNoProductionImports fails when a non-test package of the module
// depends on them.
package testkit
