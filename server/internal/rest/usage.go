package rest

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/promptkit/promptkit/jobs"
	"github.com/promptkit/promptkit/server/internal/auth"
	"github.com/promptkit/promptkit/server/internal/httpapi"
)

// UsagePage is GET /v1/usage's answer, in the shape of OpenAI's
// organization usage API (GET /v1/organization/usage/completions): time
// buckets, each with one result per group.
type UsagePage struct {
	Object   string        `json:"object"` // "page"
	Data     []UsageBucket `json:"data"`
	HasMore  bool          `json:"has_more"`
	NextPage *string       `json:"next_page"`
}

// UsageBucket is one time bucket, [StartTime, EndTime) in Unix seconds.
type UsageBucket struct {
	Object    string        `json:"object"` // "bucket"
	StartTime int64         `json:"start_time"`
	EndTime   int64         `json:"end_time"`
	Results   []UsageResult `json:"results"`
}

// UsageResult sums one group's provider calls. The group's fields are
// null unless grouped by them, as OpenAI's are. Counts and costs that are
// unknown are not in the sums: UnknownUsageRequests,
// UnknownCachedRequests, UnknownReasoningRequests and UnknownCostRequests
// count the calls they leave out.
type UsageResult struct {
	Object            string `json:"object"` // "organization.usage.completions.result"
	InputTokens       int64  `json:"input_tokens"`
	OutputTokens      int64  `json:"output_tokens"`
	InputCachedTokens int64  `json:"input_cached_tokens"`
	// promptkit's, beside OpenAI's input_cached_tokens: the reasoning
	// tokens, a part of the output tokens.
	OutputReasoningTokens int64   `json:"output_reasoning_tokens"`
	NumModelRequests      int64   `json:"num_model_requests"`
	OrgID                 *string `json:"org_id"`
	UserID                *string `json:"user_id"`
	APIKeyID              *string `json:"api_key_id"`
	Model                 *string `json:"model"`
	Backend               *string `json:"backend"`
	// promptkit's: the cost in USD of the calls whose cost is known, and
	// how many calls have unknown usage, cached or reasoning count, or
	// cost.
	CostUSD                  float64 `json:"cost_usd"`
	UnknownUsageRequests     int64   `json:"unknown_usage_requests"`
	UnknownCachedRequests    int64   `json:"unknown_cached_requests"`
	UnknownReasoningRequests int64   `json:"unknown_reasoning_requests"`
	UnknownCostRequests      int64   `json:"unknown_cost_requests"`
}

// usageGroups are group_by's values, OpenAI's names where it has them.
var usageGroups = map[string]jobs.UsageGroup{
	"org_id": jobs.UsageByOrg, "user_id": jobs.UsageByUser, "api_key_id": jobs.UsageByToken,
	"model": jobs.UsageByModel, "backend": jobs.UsageByBackend,
}

// maxUsageDays bounds a day-bucketed read: one answer, no paging.
const maxUsageDays = 366

// usageQuery is a parsed GET /v1/usage query.
type usageQuery struct {
	params jobs.UsageParams // From and To set; filters and groups
	daily  bool             // bucket_width=1d
}

// parseUsageQuery reads GET /v1/usage's query: start_time (required) and
// end_time (default now) in Unix seconds, bucket_width (1d, or none for
// one bucket), group_by (comma-separated or repeated; group_by[] too) and
// the filters user_ids, api_key_ids, models and backends (one value
// each). Every problem is a 400 naming the parameter.
func parseUsageQuery(q url.Values, now time.Time) (usageQuery, error) {
	var u usageQuery
	for name := range q {
		switch name {
		case "start_time", "end_time", "bucket_width", "group_by", "group_by[]", "user_ids", "user_ids[]",
			"api_key_ids", "api_key_ids[]", "models", "models[]", "backends", "backends[]":
		default:
			return u, httpapi.Invalid(name, "Unknown query parameter "+strconv.Quote(name)+".")
		}
	}
	unix := func(name string) (time.Time, bool, error) {
		v := q.Get(name)
		if v == "" {
			return time.Time{}, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			return time.Time{}, false, httpapi.Invalid(name, name+" must be a Unix time in seconds.")
		}
		return time.Unix(n, 0).UTC(), true, nil
	}
	start, ok, err := unix("start_time")
	if err != nil {
		return u, err
	}
	if !ok {
		return u, httpapi.Invalid("start_time", "start_time is required (Unix seconds).")
	}
	end, ok, err := unix("end_time")
	if err != nil {
		return u, err
	}
	if !ok {
		end = now.Truncate(time.Second).Add(time.Second) // the current second included
	}
	if !start.Before(end) {
		return u, httpapi.Invalid("end_time", "end_time must be after start_time.")
	}
	switch q.Get("bucket_width") {
	case "":
	case "1d":
		u.daily = true
		if days := end.Sub(start.Truncate(24*time.Hour)) / (24 * time.Hour); days >= maxUsageDays {
			return u, httpapi.Invalid("bucket_width", "bucket_width 1d gives at most "+strconv.Itoa(maxUsageDays)+" buckets per request: narrow start_time and end_time.")
		}
	default:
		return u, httpapi.Invalid("bucket_width", `bucket_width must be "1d", or absent for one bucket.`)
	}
	u.params.From, u.params.To = start, end
	for _, v := range append(q["group_by"], q["group_by[]"]...) {
		for name := range strings.SplitSeq(v, ",") {
			g, ok := usageGroups[strings.TrimSpace(name)]
			if !ok {
				return u, httpapi.Invalid("group_by", "group_by takes org_id, user_id, api_key_id, model and backend; got "+strconv.Quote(name)+".")
			}
			if slices.Contains(u.params.GroupBy, g) {
				return u, httpapi.Invalid("group_by", strconv.Quote(name)+" is in group_by twice.")
			}
			u.params.GroupBy = append(u.params.GroupBy, g)
		}
	}
	if u.daily {
		u.params.GroupBy = append(u.params.GroupBy, jobs.UsageByDay)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"user_ids", &u.params.UserID}, {"api_key_ids", &u.params.TokenID}, {"models", &u.params.Model}, {"backends", &u.params.Backend}} {
		vs := append(q[f.name], q[f.name+"[]"]...)
		if len(vs) > 1 || (len(vs) == 1 && (vs[0] == "" || strings.Contains(vs[0], ","))) {
			return u, httpapi.Invalid(f.name, f.name+" takes one non-empty value.")
		}
		if len(vs) == 1 {
			*f.dst = vs[0]
		}
	}
	return u, nil
}

// Usage answers GET /v1/usage: the usage ledger's provider calls in the
// caller's scope. A member sees its own user's calls, an admin its org's,
// the local identity (local mode: no tokens) every org's.
func (a *API) Usage(w http.ResponseWriter, r *http.Request) error {
	id := auth.Of(r)
	u, err := parseUsageQuery(r.URL.Query(), a.Now())
	if err != nil {
		return err
	}
	p := u.params
	switch {
	case id.Operator(): // every org's
	case id.Role.Admin():
		p.OrgID = id.Org
	default:
		p.OrgID = id.Org
		if p.UserID != "" && p.UserID != id.User {
			p.UserID = "\x00" // another user's: nothing (no user ID holds NUL)
		} else {
			p.UserID = id.User
		}
	}
	var buckets []jobs.UsageBucket
	if p.UserID != "\x00" {
		if buckets, err = a.Store.Usage(r.Context(), p); err != nil {
			return httpapi.About("usage", err)
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, usagePage(u, buckets))
	return nil
}

// usagePage lays buckets out as the answer: one time bucket for the whole
// range, or one per UTC day of it (empty days included), each day's first
// and last clipped to the range.
func usagePage(u usageQuery, buckets []jobs.UsageBucket) UsagePage {
	page := UsagePage{Object: "page", Data: []UsageBucket{}}
	from, to := u.params.From, u.params.To
	if !u.daily {
		b := UsageBucket{Object: "bucket", StartTime: from.Unix(), EndTime: to.Unix(), Results: []UsageResult{}}
		for _, x := range buckets {
			b.Results = append(b.Results, usageResult(u.params, x))
		}
		page.Data = append(page.Data, b)
		return page
	}
	i := 0
	for day := from.Truncate(24 * time.Hour); day.Before(to); day = day.Add(24 * time.Hour) {
		b := UsageBucket{Object: "bucket", StartTime: max(day.Unix(), from.Unix()),
			EndTime: min(day.Add(24*time.Hour).Unix(), to.Unix()), Results: []UsageResult{}}
		for ; i < len(buckets) && buckets[i].Day.Equal(day); i++ {
			b.Results = append(b.Results, usageResult(u.params, buckets[i]))
		}
		page.Data = append(page.Data, b)
	}
	return page
}

func usageResult(p jobs.UsageParams, b jobs.UsageBucket) UsageResult {
	group := func(g jobs.UsageGroup, v string) *string {
		if !p.Groups(g) {
			return nil
		}
		return &v
	}
	return UsageResult{
		Object: "organization.usage.completions.result", InputTokens: b.InputTokens, OutputTokens: b.OutputTokens,
		InputCachedTokens: b.CachedInputTokens, OutputReasoningTokens: b.ReasoningTokens, NumModelRequests: b.Requests,
		OrgID: group(jobs.UsageByOrg, b.OrgID), UserID: group(jobs.UsageByUser, b.UserID),
		APIKeyID: group(jobs.UsageByToken, b.TokenID), Model: group(jobs.UsageByModel, b.Model),
		Backend: group(jobs.UsageByBackend, b.Backend),
		CostUSD: b.CostUSD, UnknownUsageRequests: b.UnknownUsage, UnknownCachedRequests: b.UnknownCached,
		UnknownReasoningRequests: b.UnknownReasoning, UnknownCostRequests: b.UnknownCost,
	}
}
