package auth

import (
	"cmp"
	"fmt"
)

// Shares bound what one process holds of a resource (unspent stream
// tickets, open event streams): in all (the memory it takes), of one org,
// and of one identity. The org's bound is a fraction of the whole, so
// that one org, however many tokens its admin creates, cannot take what
// every other org needs; the identity's is a fraction of the org's, for
// the same reason between the org's users. Beyond a bound, whoever
// reached it gets no more until some is given back.
type Shares struct {
	Total, PerOrg, PerIdentity int
}

// Or is s with its zero fields taken from d.
func (s Shares) Or(d Shares) Shares {
	return Shares{Total: cmp.Or(s.Total, d.Total), PerOrg: cmp.Or(s.PerOrg, d.PerOrg), PerIdentity: cmp.Or(s.PerIdentity, d.PerIdentity)}
}

// Held counts what is held of a resource in all, by org and by identity.
// It is not safe for concurrent use: its owner's lock guards it.
type Held struct {
	total          int
	perOrg, perKey map[string]int
}

// Full names the bound of s that id has reached, as "the organisation's
// limit of 1000 " + what; "" when it may take one more.
func (h *Held) Full(s Shares, id Identity, what string) string {
	switch {
	case h.perKey[id.Key] >= s.PerIdentity:
		return fmt.Sprintf("%s limit of %d %s", id.Whose(), s.PerIdentity, what)
	case h.perOrg[id.Org] >= s.PerOrg:
		return fmt.Sprintf("the organisation's limit of %d %s", s.PerOrg, what)
	case h.total >= s.Total:
		return fmt.Sprintf("the server's limit of %d %s", s.Total, what)
	}
	return ""
}

// Len is how many are held in all.
func (h *Held) Len() int { return h.total }

// Add counts one more held by id.
func (h *Held) Add(id Identity) {
	if h.perOrg == nil {
		h.perOrg, h.perKey = map[string]int{}, map[string]int{}
	}
	h.total++
	h.perOrg[id.Org]++
	h.perKey[id.Key]++
}

// Remove counts one fewer held by id.
func (h *Held) Remove(id Identity) {
	h.total--
	if h.perOrg[id.Org]--; h.perOrg[id.Org] <= 0 {
		delete(h.perOrg, id.Org)
	}
	if h.perKey[id.Key]--; h.perKey[id.Key] <= 0 {
		delete(h.perKey, id.Key)
	}
}
