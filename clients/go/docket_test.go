package docket

// Against real servers started by clients/test.sh: DOCKET_TEST_SERVERS="sqlite=URL,postgres=URL,mysql=URL"
// and DOCKET_TEST_TLS_URL / DOCKET_TEST_CA / DOCKET_TEST_TOKEN. Each test works its own queue.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func servers(t *testing.T) map[string]string {
	raw := os.Getenv("DOCKET_TEST_SERVERS")
	if raw == "" {
		t.Fatal("run these tests through clients/test.sh (it starts the servers)")
	}
	out := map[string]string{}
	for _, item := range strings.Split(raw, ",") {
		kv := strings.SplitN(item, "=", 2)
		out[kv[0]] = kv[1]
	}
	return out
}

func uniq() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "go-" + hex.EncodeToString(b)
}

func eachServer(t *testing.T, fn func(t *testing.T, c *Client)) {
	forServers(t, false, fn)
}

// eachServerAtOnce is eachServer with the backends' subtests run at once: for tests that
// mostly wait (one after another, the stop test's rounds took 37 s).
func eachServerAtOnce(t *testing.T, fn func(t *testing.T, c *Client)) {
	forServers(t, true, fn)
}

func forServers(t *testing.T, parallel bool, fn func(t *testing.T, c *Client)) {
	for backend, url := range servers(t) {
		url := url
		t.Run(backend, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			c, err := NewClient(Options{Server: url})
			if err != nil {
				t.Fatal(err)
			}
			fn(t, c)
		})
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// must returns v, or panics with err (a panic fails the test with its stack).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func i32(v int32) *int32 { return &v }

// runUntil runs w until cond holds, then stops it and waits.
func runUntil(t *testing.T, w *Worker, d time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}()
	waitFor(t, d, cond)
}

func TestClient(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		runAt := time.Now().Add(time.Hour).UTC()
		task := must(c.Enqueue(ctx, NewTask{Kind: "email", Payload: map[string]string{"to": "a@b.c"}, Queue: q,
			Priority: i32(7), RunAt: &runAt, UniqueKey: q + "-u", ConcurrencyKey: "k", ConcurrencyLimit: i32(2),
			Timeout: Duration(90 * time.Second), Backoff: &Backoff{Initial: "2s", Max: "1m"}, Stage: "render",
			UserID: "u-1", TraceID: "0af7651916cd43dd8448eb211c80319c", MaxAttempts: i32(4), ExpiresIn: "2h",
			Progress: map[string]int{"p": 0}}))
		got := must(c.GetTask(ctx, task.ID))
		to, _ := ParseDuration(got.Timeout)
		if got.Queue != q || got.Priority != 7 || got.State != "scheduled" || got.RunAt.Sub(runAt).Abs() > time.Second ||
			*got.UniqueKey != q+"-u" || *got.ConcurrencyKey != "k" || *got.ConcurrencyLimit != 2 || to != 90*time.Second ||
			*got.Stage != "render" || *got.UserID != "u-1" || *got.TraceID != "0af7651916cd43dd8448eb211c80319c" ||
			got.MaxAttempts != 4 || got.ExpiresAt == nil || string(got.Progress) != `{"p":0}` || got.Version == "" {
			t.Fatalf("task stored wrong: %+v", got)
		}
		again := must(c.Enqueue(ctx, NewTask{Kind: "email", Queue: q, UniqueKey: q + "-u"}))
		if again.ID != task.ID || again.Inserted == nil || *again.Inserted {
			t.Fatalf("unique key: %+v", again)
		}
		_, err := c.GetTask(ctx, 987654321)
		var e *Error
		if !errors.As(err, &e) || e.Code != "not_found" || e.Status != 404 {
			t.Fatalf("want not_found, got %v", err)
		}
		if _, err := c.Complete(ctx, task.ID, CompleteRequest{Lease: "not-a-lease"}); !IsCode(err, "lease_lost") {
			t.Fatalf("want lease_lost, got %v", err)
		}
		p := must(c.UpdateTask(ctx, task.ID, TaskPatch{Priority: i32(5)}, got.Version))
		if p.Priority != 5 || p.Version == got.Version {
			t.Fatalf("patch: %+v", p)
		}
		if _, err := c.UpdateTask(ctx, task.ID, TaskPatch{Priority: i32(6)}, got.Version); !IsCode(err, "version_mismatch") {
			t.Fatalf("want version_mismatch, got %v", err)
		}
		if s := must(c.RunNow(ctx, task.ID)).State; s != "available" {
			t.Fatal(s)
		}
		if s := must(c.CancelTask(ctx, task.ID)).State; s != "cancelled" {
			t.Fatal(s)
		}
		if s := must(c.RetryTask(ctx, task.ID)).State; s != "available" {
			t.Fatal(s)
		}
		many := must(c.EnqueueMany(ctx, []NewTask{{Kind: "n", Payload: 1, Queue: q}, {Kind: "n", Payload: 2, Queue: q}, {Kind: "n", Payload: 3, Queue: q}}))
		if len(many) != 3 {
			t.Fatal(many)
		}
		page := must(c.ListTasks(ctx, TaskFilter{Queue: q, Kind: "n", State: "available,running", Limit: 2}))
		rest := must(c.ListTasks(ctx, TaskFilter{Queue: q, Kind: "n", Limit: 10, After: *page.NextAfter}))
		if len(page.Tasks) != 2 || len(rest.Tasks) != 1 {
			t.Fatal(page, rest)
		}
		// The work path by hand.
		claimed := must(c.Claim(ctx, q, ClaimRequest{Worker: "hand", Limit: 10, Lease: "30s", Wait: "1s", Kinds: []string{"n"}}))
		if len(claimed) != 3 {
			t.Fatal(claimed)
		}
		beat := must(c.Heartbeat(ctx, claimed[0].ID, HeartbeatRequest{Lease: claimed[0].Lease.Token, Progress: "half", Extend: "1m"}))
		if !beat.LeaseExpiresAt.After(claimed[0].Lease.ExpiresAt) {
			t.Fatal("heartbeat did not extend the lease")
		}
		outs := must(c.CompleteMany(ctx, []CompleteRequest{{ID: claimed[0].ID, Lease: claimed[0].Lease.Token, Result: 1}}))
		fouts := must(c.FailMany(ctx, []FailRequest{{ID: claimed[1].ID, Lease: claimed[1].Lease.Token, Error: "no", Permanent: true}}))
		if outs[0].Outcome != "ok" || fouts[0].Outcome != "ok" {
			t.Fatal(outs, fouts)
		}
		// Queues and schedules.
		if err := c.PutQueue(ctx, q, QueueSettings{ConcurrencyLimit: i32(3)}); err != nil {
			t.Fatal(err)
		}
		if qs := must(c.GetQueue(ctx, q)); *qs.Settings.ConcurrencyLimit != 3 {
			t.Fatal(qs)
		}
		name := q + "-nightly"
		must(c.PutSchedule(ctx, ScheduleSpec{Name: name, Task: NewTask{Kind: "report", Queue: q}, Cron: "0 3 * * *"}))
		if s := must(c.GetSchedule(ctx, name)); s["cron"] != "0 3 * * *" {
			t.Fatal(s)
		}
		if err := c.DeleteSchedule(ctx, name); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetSchedule(ctx, name); !IsCode(err, "not_found") {
			t.Fatal(err)
		}
	})
}

// TestEnqueueDebounce: a waiting task with the debounce key is replaced (the same ID, the new
// payload, a run_at no earlier); another key makes a new task; debounce with RunIn is refused.
func TestEnqueueDebounce(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		d := &Debounce{Key: q + "-d", Period: "10s", MaxWait: Duration(time.Minute)}
		first := must(c.Enqueue(ctx, NewTask{Kind: "sync", Payload: map[string]int{"n": 1}, Queue: q, Debounce: d}))
		if first.Inserted == nil || !*first.Inserted || first.Replaced == nil || *first.Replaced ||
			first.DebounceKey == nil || *first.DebounceKey != q+"-d" || first.State != "scheduled" {
			t.Fatalf("first enqueue: %+v", first)
		}
		second := must(c.Enqueue(ctx, NewTask{Kind: "sync", Payload: map[string]int{"n": 2}, Queue: q, Debounce: d}))
		if second.ID != first.ID || second.Inserted == nil || *second.Inserted || second.Replaced == nil ||
			!*second.Replaced || string(second.Payload) != `{"n":2}` || second.RunAt.Before(first.RunAt) {
			t.Fatalf("second enqueue: %+v (first %+v)", second, first)
		}
		got := must(c.GetTask(ctx, first.ID))
		if string(got.Payload) != `{"n":2}` || got.DebounceKey == nil || *got.DebounceKey != q+"-d" {
			t.Fatalf("read back: %+v", got)
		}
		other := must(c.Enqueue(ctx, NewTask{Kind: "sync", Payload: map[string]int{"n": 3}, Queue: q,
			Debounce: &Debounce{Key: q + "-e", Period: "10s"}}))
		if other.ID == first.ID || other.Inserted == nil || !*other.Inserted || other.Replaced == nil || *other.Replaced {
			t.Fatalf("another key: %+v", other)
		}
		_, err := c.Enqueue(ctx, NewTask{Kind: "sync", Queue: q, RunIn: "5s", Debounce: d})
		var e *Error
		if !errors.As(err, &e) || e.Code != "invalid_task" || e.Status != 422 {
			t.Fatalf("want invalid_task, got %v", err)
		}
	})
}

// TestClaimWith: a lean claim answers lean tasks only; a claim that completes and fails what
// the first took answers their outcomes and claims more; one bad item refuses the whole claim.
func TestClaimWith(t *testing.T) {
	eachServer(t, func(t *testing.T, direct *Client) {
		ctx := context.Background()
		rec := &recorder{next: http.DefaultTransport}
		c := must(NewClient(Options{Server: direct.server, HTTPClient: &http.Client{Transport: rec}}))
		q := uniq()
		var specs []NewTask
		for i := 0; i < 3; i++ {
			specs = append(specs, NewTask{Kind: "k", Payload: i, Queue: q, MaxAttempts: i32(1)})
		}
		tasks := must(c.EnqueueMany(ctx, specs))
		ids := []int64{tasks[0].ID, tasks[1].ID, tasks[2].ID}
		first := must(c.ClaimWith(ctx, q, ClaimRequest{Worker: "go", Limit: 2, Lean: true}))
		if len(first.Tasks) != 0 || len(first.Lean) != 2 || first.Completed != nil || first.Failed != nil {
			t.Fatalf("lean claim: %+v", first)
		}
		for i, lt := range first.Lean {
			if lt.ID != ids[i] || string(lt.Payload) != strconv.Itoa(i) || lt.Attempt != 1 || lt.MaxAttempts != 1 ||
				lt.Kind != "k" || lt.Lease.Token == "" || lt.AttemptedAt == nil || lt.Timeout == "" {
				t.Fatalf("lean task %d: %+v", i, lt)
			}
		}
		// Lean: no more than a handler needs (the answer as it came).
		var raw struct {
			Tasks []json.RawMessage            `json:"tasks"`
			Lean  []map[string]json.RawMessage `json:"lean"`
		}
		if err := json.Unmarshal(rec.last(), &raw); err != nil || raw.Tasks == nil || len(raw.Tasks) != 0 || len(raw.Lean) != 2 {
			t.Fatalf("lean answer %s: %v", rec.last(), err)
		}
		if _, ok := raw.Lean[0]["created_at"]; ok {
			t.Fatalf("a lean task with created_at: %s", rec.last())
		}
		second := must(c.ClaimWith(ctx, q, ClaimRequest{Worker: "go", Limit: 5, Lean: true,
			Complete: []CompleteRequest{{ID: ids[0], Lease: first.Lean[0].Lease.Token, Result: "r"}},
			Fail:     []FailRequest{{ID: ids[1], Lease: first.Lean[1].Lease.Token, Error: "e"}}}))
		outcome := func(outs []ItemOutcome) string {
			var parts []string
			for _, o := range outs {
				state := ""
				if o.State != nil {
					state = *o.State
				}
				parts = append(parts, fmt.Sprintf("%d %s %s", o.ID, o.Outcome, state))
			}
			return strings.Join(parts, ", ")
		}
		if got, want := outcome(second.Completed), fmt.Sprintf("%d ok completed", ids[0]); got != want {
			t.Fatalf("completed: %s, want %s", got, want)
		}
		if got, want := outcome(second.Failed), fmt.Sprintf("%d ok discarded", ids[1]); got != want {
			t.Fatalf("failed: %s, want %s", got, want)
		}
		if len(second.Lean) != 1 || second.Lean[0].ID != ids[2] || len(second.Tasks) != 0 {
			t.Fatalf("second claim: %+v", second)
		}
		if r := string(must(c.GetTask(ctx, ids[0])).Result); r != `"r"` {
			t.Fatalf("result %s", r)
		}
		// One bad item refuses the request: nothing reported, nothing claimed.
		_, err := c.ClaimWith(ctx, q, ClaimRequest{Worker: "go", Complete: []CompleteRequest{{ID: ids[2], Lease: ""}}})
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 {
			t.Fatalf("want a 400, got %v", err)
		}
		if s := must(c.GetTask(ctx, ids[2])).State; s != "running" {
			t.Fatalf("task %d: %s, want running", ids[2], s)
		}
	})
}

// recorder is a transport that keeps the last answer's body.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	body []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.body = body
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func (r *recorder) last() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body
}

// TestListFindsByTraceIDUniqueKeyAndWorker: ListTasks with TraceID, UniqueKey and Worker finds
// exactly their tasks, running or finished, alone and with the other filters (issue 37 item 7).
func TestListFindsByTraceIDUniqueKeyAndWorker(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		b16 := make([]byte, 16)
		_, _ = rand.Read(b16)
		trace, worker := hex.EncodeToString(b16), "w-"+q
		a := must(c.Enqueue(ctx, NewTask{Kind: "s", Payload: 1, Queue: q, TraceID: trace, UniqueKey: q + "-a"})).ID
		b := must(c.Enqueue(ctx, NewTask{Kind: "s", Payload: 2, Queue: q, UniqueKey: q + "-b"})).ID
		cc := must(c.Enqueue(ctx, NewTask{Kind: "s", Payload: 3, Queue: q})).ID
		// The same trace in another queue: a trace id names no single task.
		d := must(c.Enqueue(ctx, NewTask{Kind: "s", Payload: 4, Queue: q + "-x", TraceID: trace})).ID
		got := must(c.Claim(ctx, q, ClaimRequest{Worker: worker, Limit: 2, Kinds: []string{"s"}}))
		if len(got) != 2 || got[0].ID+got[1].ID != a+b {
			t.Fatalf("claimed %+v", got)
		}
		for _, task := range got {
			if task.ID == a {
				must(c.Complete(ctx, a, CompleteRequest{Lease: task.Lease.Token, Result: "ok"}))
			}
		}
		if s := must(c.GetTask(ctx, a)).State; s != "completed" {
			t.Fatal(s)
		}
		if s := must(c.GetTask(ctx, cc)).State; s != "available" {
			t.Fatal(s)
		}
		check := func(f TaskFilter, want ...int64) {
			t.Helper()
			f.Limit = 100
			var ids []int64
			for _, task := range must(c.ListTasks(ctx, f)).Tasks {
				ids = append(ids, task.ID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Fatalf("%+v: found %v, want %v", f, ids, want)
			}
		}
		check(TaskFilter{TraceID: trace}, a, d)
		check(TaskFilter{TraceID: strings.ToUpper(trace)}, a, d)
		check(TaskFilter{TraceID: trace, Queue: q}, a)
		check(TaskFilter{TraceID: strings.Repeat("f", 32)})
		check(TaskFilter{UniqueKey: q + "-a"}, a)
		check(TaskFilter{UniqueKey: q + "-b", State: "running"}, b)
		check(TaskFilter{UniqueKey: q + "-b", State: "completed,available"})
		check(TaskFilter{Worker: worker}, a, b)
		check(TaskFilter{Worker: worker, Order: "desc"}, b, a)
		check(TaskFilter{Worker: worker, State: "completed"}, a)
		check(TaskFilter{Worker: worker, TraceID: trace}, a)
		check(TaskFilter{Worker: worker, UniqueKey: q + "-b"}, b)
		check(TaskFilter{Worker: "nobody-" + q})
	})
}

// TestTags: ListTasks and a bulk dry run find the tasks with a tag, in id order; 21 tags or an
// empty one are refused (issue 43).
func TestTags(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		a := must(c.Enqueue(ctx, NewTask{Kind: "t", Payload: 1, Queue: q, Tags: []string{q + ":a", "shared-" + q}})).ID
		b := must(c.Enqueue(ctx, NewTask{Kind: "t", Payload: 2, Queue: q, Tags: []string{q + ":a"}})).ID
		other := must(c.Enqueue(ctx, NewTask{Kind: "t", Payload: 3, Queue: q, Tags: []string{q + ":b"}}))
		if fmt.Sprint(other.Tags) != fmt.Sprint([]string{q + ":b"}) {
			t.Fatalf("enqueued: %+v", other)
		}
		if got := must(c.GetTask(ctx, a)).Tags; fmt.Sprint(got) != fmt.Sprint([]string{q + ":a", "shared-" + q}) {
			t.Fatalf("read back: %v", got)
		}
		check := func(f TaskFilter, want ...int64) {
			t.Helper()
			f.Limit = 100
			var ids []int64
			for _, task := range must(c.ListTasks(ctx, f)).Tasks {
				ids = append(ids, task.ID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Fatalf("%+v: found %v, want %v", f, ids, want)
			}
		}
		check(TaskFilter{Tag: q + ":a"}, a, b)
		check(TaskFilter{Tag: "shared-" + q}, a)
		many := make([]string, 21)
		for i := range many {
			many[i] = fmt.Sprintf("%s:%d", q, i)
		}
		for _, bad := range [][]string{many, {""}} {
			_, err := c.Enqueue(ctx, NewTask{Kind: "t", Queue: q, Tags: bad})
			var e *Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 || e.Code != "invalid_task" {
				t.Fatalf("%d tags: want invalid_task, got %v", len(bad), err)
			}
		}
		check(TaskFilter{Queue: q}, a, b, other.ID)
		if n := must(c.CountBulk(ctx, "cancel", BulkFilter{Tag: q + ":a"})); n.Total != 2 || n.More {
			t.Fatalf("bulk count by tag: %+v", n)
		}
	})
}

// TestLabels: Requires and Prefer are echoed; a claim without labels takes only the task that
// requires and prefers nothing, one with {"gpu": "a100", "region": "eu"} the other two; 21
// labels or an empty value are refused (422 invalid_task on enqueue, 400 invalid_request on a
// claim) and nothing is written; a worker's labels go with its claims and its reports
// (GET /v1/workers) (issue 43).
func TestLabels(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		gpu := must(c.Enqueue(ctx, NewTask{Kind: "t", Payload: 1, Queue: q, Requires: map[string]string{"gpu": "a100"}}))
		plain := must(c.Enqueue(ctx, NewTask{Kind: "t", Payload: 2, Queue: q}))
		eu := must(c.EnqueueMany(ctx, []NewTask{{Kind: "t", Payload: 3, Queue: q,
			Prefer: &Prefer{Labels: map[string]string{"region": "eu"}, For: Duration(time.Hour)}}}))[0]
		if fmt.Sprint(gpu.Requires) != "map[gpu:a100]" || gpu.Prefer != nil {
			t.Fatalf("enqueued: %+v", gpu)
		}
		if eu.Prefer == nil || fmt.Sprint(*eu.Prefer) != "{map[region:eu] 1h}" || eu.Requires != nil {
			t.Fatalf("enqueued: %+v", eu)
		}
		if plain.Requires != nil || plain.Prefer != nil {
			t.Fatalf("enqueued: %+v", plain)
		}
		if got := must(c.GetTask(ctx, gpu.ID)); fmt.Sprint(got.Requires) != "map[gpu:a100]" {
			t.Fatalf("read back: %+v", got)
		}
		if got := must(c.GetTask(ctx, eu.ID)).Prefer; got == nil || fmt.Sprint(*got) != "{map[region:eu] 1h}" {
			t.Fatalf("read back: %+v", got)
		}
		many := map[string]string{}
		for i := 0; i < 21; i++ {
			many[fmt.Sprintf("l%d", i)] = "x"
		}
		refused := func(err error, status int, code string) {
			t.Helper()
			var e *Error
			if !errors.As(err, &e) || e.Status != status || e.Code != code {
				t.Fatalf("want %d %s, got %v", status, code, err)
			}
		}
		for _, bad := range []NewTask{{Requires: many}, {Requires: map[string]string{"gpu": ""}},
			{Prefer: &Prefer{Labels: map[string]string{"region": ""}, For: "1h"}}} {
			bad.Kind, bad.Queue = "t", q
			_, err := c.Enqueue(ctx, bad)
			refused(err, 422, "invalid_task")
		}
		for _, bad := range []map[string]string{many, {"gpu": ""}} {
			_, err := c.Claim(ctx, q, ClaimRequest{Worker: "go", Limit: 10, Labels: bad})
			refused(err, 400, "invalid_request")
		}
		var states []string
		for _, task := range must(c.ListTasks(ctx, TaskFilter{Queue: q, Limit: 100})).Tasks {
			states = append(states, fmt.Sprintf("%d %s", task.ID, task.State))
		}
		if want := fmt.Sprintf("[%d available %d available %d available]", gpu.ID, plain.ID, eu.ID); fmt.Sprint(states) != want {
			t.Fatalf("tasks %v, want %s", states, want)
		}
		ids := func(ts []Task) (out []int64) {
			for _, task := range ts {
				out = append(out, task.ID)
			}
			sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
			return out
		}
		if got := ids(must(c.Claim(ctx, q, ClaimRequest{Worker: "go", Limit: 10}))); fmt.Sprint(got) != fmt.Sprint([]int64{plain.ID}) {
			t.Fatalf("a claim without labels took %v, want [%d]", got, plain.ID)
		}
		got := ids(must(c.Claim(ctx, q, ClaimRequest{Worker: "go", Limit: 10, Labels: map[string]string{"gpu": "a100", "region": "eu"}})))
		if fmt.Sprint(got) != fmt.Sprint([]int64{gpu.ID, eu.ID}) {
			t.Fatalf("a claim with labels took %v, want [%d %d]", got, gpu.ID, eu.ID)
		}

		wq := q + "-w"
		need := must(c.Enqueue(ctx, NewTask{Kind: "t", Payload: 4, Queue: wq, Requires: map[string]string{"gpu": "a100"}}))
		w := must(NewWorker(WorkerOptions{Client: c, Queue: wq, Name: wq + "-w", Concurrency: 1, Wait: 200 * time.Millisecond,
			Labels: map[string]string{"gpu": "a100"}}))
		w.Register("t", func(ctx context.Context, job *Job) (interface{}, error) { return "done", nil })
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(rctx) }()
		waitFor(t, 30*time.Second, func() bool { return must(c.GetTask(ctx, need.ID)).State == "completed" })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		var report *WorkerReport
		for _, v := range must(c.ListWorkers(ctx)) {
			if v.Name == wq+"-w" {
				r := v.Report
				report = &r
			}
		}
		if report == nil || fmt.Sprint(report.Labels) != "map[gpu:a100]" {
			t.Fatalf("the worker's report: %+v, want labels map[gpu:a100]", report)
		}
	})
}

func TestWorker(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		var specs []NewTask
		for i := 0; i < 30; i++ {
			specs = append(specs, NewTask{Kind: "add", Payload: []int{i, i}, Queue: q})
		}
		ids := must(c.EnqueueMany(ctx, specs))
		flaky := must(c.Enqueue(ctx, NewTask{Kind: "flaky", Queue: q, MaxAttempts: i32(5)}))
		perm := must(c.Enqueue(ctx, NewTask{Kind: "bad", Queue: q, MaxAttempts: i32(10)}))
		boom := must(c.Enqueue(ctx, NewTask{Kind: "boom", Queue: q, MaxAttempts: i32(1)}))
		sleepy := must(c.Enqueue(ctx, NewTask{Kind: "sleepy", Queue: q, Timeout: "1s", MaxAttempts: i32(1)}))
		long := must(c.Enqueue(ctx, NewTask{Kind: "long", Queue: q, Timeout: "60s"}))
		order := must(c.Enqueue(ctx, NewTask{Kind: "order", Payload: map[string]int{"n": 1}, Queue: q, Stage: "reserve"}))
		w := must(NewWorker(WorkerOptions{Client: c, Queue: q, Concurrency: 8, Wait: 300 * time.Millisecond, Lease: time.Second, Name: q + "-w"}))
		w.Register("add", func(ctx context.Context, job *Job) (interface{}, error) {
			var p []int
			if err := job.Payload(&p); err != nil {
				return nil, err
			}
			return p[0] + p[1], nil
		})
		w.Register("flaky", func(ctx context.Context, job *Job) (interface{}, error) {
			if job.Attempt() < 3 {
				return nil, RetryIn(1500*time.Millisecond, fmt.Errorf("not yet (%d)", job.Attempt()))
			}
			return "third time", nil
		})
		w.Register("bad", func(ctx context.Context, job *Job) (interface{}, error) {
			return nil, Permanent(errors.New("card declined"))
		})
		w.Register("boom", func(ctx context.Context, job *Job) (interface{}, error) {
			var m map[string]int
			m["x"]++ // panics: nil map
			return nil, nil
		})
		aborted := make(chan string, 4)
		hold := func(ctx context.Context, job *Job) (interface{}, error) {
			select {
			case <-ctx.Done():
				aborted <- job.Kind()
				return nil, ctx.Err()
			case <-time.After(30 * time.Second):
				return nil, nil
			}
		}
		w.Register("sleepy", hold)
		w.Register("long", func(ctx context.Context, job *Job) (interface{}, error) {
			job.Progress(map[string]int{"step": 1})
			return hold(ctx, job)
		})
		w.RegisterStage("order", "reserve", func(ctx context.Context, job *Job) (interface{}, error) {
			return &NextStage{Stage: "charge", Payload: map[string]interface{}{"n": 1, "reserved": true}}, nil
		})
		w.RegisterStage("order", "charge", func(ctx context.Context, job *Job) (interface{}, error) {
			return map[string]interface{}{"charged": job.Task.Payload}, nil
		})
		cancelled := false
		runUntil(t, w, 40*time.Second, func() bool {
			l := must(c.GetTask(ctx, long.ID))
			if !cancelled && l.State == "running" && string(l.Progress) == `{"step":1}` {
				must(c.CancelTask(ctx, long.ID))
				cancelled = true
			}
			done := must(c.ListTasks(ctx, TaskFilter{Queue: q, State: "completed,discarded,cancelled", Limit: 100}))
			return len(done.Tasks) == 36 && len(aborted) == 2
		})
		for i, task := range ids {
			if r := string(must(c.GetTask(ctx, task.ID)).Result); r != strconv.Itoa(2*i) {
				t.Fatalf("task %d: result %s", i, r)
			}
		}
		f := must(c.GetTask(ctx, flaky.ID))
		if f.State != "completed" || f.Attempt != 3 || len(f.Errors) != 2 || f.Errors[0].Message != "not yet (1)" ||
			f.Runs[1].StartedAt.Sub(f.Runs[0].FinishedAt) < 1400*time.Millisecond {
			t.Fatalf("flaky: %+v", f)
		}
		if p := must(c.GetTask(ctx, perm.ID)); p.State != "discarded" || p.Attempt != 1 || p.Errors[0].Message != "card declined" {
			t.Fatalf("permanent: %+v", p)
		}
		if b := must(c.GetTask(ctx, boom.ID)); !strings.HasPrefix(b.Errors[0].Message, "panic: assignment to entry in nil map") ||
			!strings.Contains(b.Errors[0].Message, "docket_test.go") {
			t.Fatalf("panic not recorded with its stack: %+v", b.Errors)
		}
		if s := must(c.GetTask(ctx, sleepy.ID)); s.State != "discarded" || !strings.HasPrefix(s.Errors[0].Message, "timeout") {
			t.Fatalf("timeout: %+v", s)
		}
		if l := must(c.GetTask(ctx, long.ID)); l.State != "cancelled" {
			t.Fatalf("cancel: %+v", l)
		}
		if o := must(c.GetTask(ctx, order.ID)); string(o.Result) != `{"charged":{"n":1,"reserved":true}}` {
			t.Fatalf("stages: %s", o.Result)
		}
		found := false
		for _, v := range must(c.ListWorkers(ctx)) {
			if v.Name == q+"-w" {
				found = true
				if v.Report.Labels != nil {
					t.Fatalf("a worker without labels reported labels %v", v.Report.Labels)
				}
			}
		}
		if !found {
			t.Fatal("the worker did not report to /v1/workers")
		}
	})
}

func TestPrefetch(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		var specs []NewTask
		for i := 0; i < 4; i++ {
			specs = append(specs, NewTask{Kind: "one", Payload: i, Queue: q})
		}
		tasks := must(c.EnqueueMany(ctx, specs))
		w := must(NewWorker(WorkerOptions{Client: c, Queue: q, Concurrency: 1, Prefetch: 3, Wait: 200 * time.Millisecond}))
		started := make(chan int64, 4)
		w.Register("one", func(ctx context.Context, job *Job) (interface{}, error) {
			started <- job.ID()
			time.Sleep(time.Second)
			return "done", nil
		})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(rctx) }()
		first := <-started
		waitFor(t, 10*time.Second, func() bool {
			for _, task := range tasks {
				if must(c.GetTask(ctx, task.ID)).State != "running" {
					return false
				}
			}
			return true
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if first != tasks[0].ID || len(started) != 0 {
			t.Fatalf("started %d and %d more", first, len(started))
		}
		if got := must(c.GetTask(ctx, first)); got.State != "completed" || string(got.Result) != `"done"` {
			t.Fatalf("%+v", got)
		}
		for _, task := range tasks[1:] {
			got := must(c.GetTask(ctx, task.ID)) // released: no attempt counted, no error
			if got.State != "available" || got.Attempt != 0 || len(got.Errors) != 0 {
				t.Fatalf("%+v", got)
			}
		}
	})
}

func TestPrefetchOptions(t *testing.T) {
	c := must(NewClient(Options{Server: "http://127.0.0.1:1"}))
	for _, tc := range []struct {
		o                 WorkerOptions
		batch, claims, pf int
	}{
		{WorkerOptions{Concurrency: 10}, 1000, 2, 0},                         // automatic: none before a handler ran
		{WorkerOptions{Concurrency: 10, Prefetch: NoPrefetch}, 10, 2, 0},     // none
		{WorkerOptions{Concurrency: 10, Prefetch: -5, Claims: -1}, 10, 1, 0}, // negative: none, as before
		{WorkerOptions{Concurrency: 4, Prefetch: 3, Claims: 40}, 7, 16, 3},
		{WorkerOptions{Concurrency: 900, Prefetch: 300, Claims: 1}, 1000, 1, 300},
	} {
		tc.o.Client = c
		w := must(NewWorker(tc.o))
		if w.o.Batch != tc.batch || w.o.Claims != tc.claims || w.Prefetching() != tc.pf {
			t.Fatalf("%+v: batch %d claims %d prefetching %d", tc.o, w.o.Batch, w.o.Claims, w.Prefetching())
		}
	}
	for _, tc := range []struct {
		concurrency int
		avg         time.Duration
		known       bool
		want        int
	}{
		{2, 10 * time.Microsecond, true, 1000}, {2, 300 * time.Millisecond, true, 0}, {10, 50 * time.Millisecond, true, 20},
		{10, 0, true, 1000}, {10, 50 * time.Millisecond, false, 0}, {3, 100 * time.Millisecond, true, 3},
	} {
		if got := AutoPrefetch(tc.concurrency, tc.avg, tc.known); got != tc.want {
			t.Fatalf("AutoPrefetch(%d, %v, %v) = %d, want %d", tc.concurrency, tc.avg, tc.known, got, tc.want)
		}
	}
	w := must(NewWorker(WorkerOptions{Client: c, Concurrency: 2}))
	for _, d := range []time.Duration{time.Millisecond, 11 * time.Millisecond} {
		w.ran(d)
	}
	if w.avgRun != 2*time.Millisecond || w.Prefetching() != 100 {
		t.Fatalf("moving average %v, prefetching %d", w.avgRun, w.Prefetching())
	}
}

// Automatic prefetch (the default): short handlers get tasks held ahead (up to 1000); handlers
// of 300 ms with concurrency 2 hold none — the worker never has more tasks running in docket
// than handlers.
func TestPrefetchAutoHoldsShortTasksAheadAndNeverLongOnes(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		quick := uniq()
		var specs []NewTask
		for i := 0; i < 300; i++ {
			specs = append(specs, NewTask{Kind: "quick", Payload: i, Queue: quick})
		}
		must(c.EnqueueMany(ctx, specs))
		wq := must(NewWorker(WorkerOptions{Client: c, Queue: quick, Concurrency: 2, Wait: 200 * time.Millisecond, ReportInterval: -1}))
		wq.Register("quick", func(ctx context.Context, job *Job) (interface{}, error) { return job.Task.Payload, nil })
		if n := wq.Prefetching(); n != 0 {
			t.Fatalf("%d held ahead before a handler ran", n)
		}
		runUntil(t, wq, 60*time.Second, func() bool { return wq.CompletedCount() == 300 })
		if n := wq.Prefetching(); n < 100 {
			t.Fatalf("short tasks: %d held ahead", n)
		}

		slow := uniq()
		name := slow + "-w"
		specs = specs[:0]
		for i := 0; i < 6; i++ {
			specs = append(specs, NewTask{Kind: "slow", Payload: i, Queue: slow})
		}
		must(c.EnqueueMany(ctx, specs))
		ws := must(NewWorker(WorkerOptions{Client: c, Queue: slow, Name: name, Concurrency: 2, Wait: 200 * time.Millisecond, ReportInterval: -1}))
		var mu sync.Mutex
		most := 0
		// Tasks whose handler returned: the server shows them running until the worker's
		// (coalesced) report arrives, which is not holding them ahead.
		finished := map[int64]bool{}
		ws.Register("slow", func(ctx context.Context, job *Job) (interface{}, error) {
			held, err := c.ListTasks(ctx, TaskFilter{Queue: slow, State: "running", Worker: name, Limit: 100})
			if err != nil {
				return nil, err
			}
			mu.Lock()
			n := 0
			for _, t := range held.Tasks {
				if !finished[t.ID] {
					n++
				}
			}
			if n > most {
				most = n
			}
			mu.Unlock()
			time.Sleep(300 * time.Millisecond)
			mu.Lock()
			finished[job.ID()] = true
			mu.Unlock()
			return nil, nil
		})
		runUntil(t, ws, 60*time.Second, func() bool { return ws.CompletedCount() == 6 })
		mu.Lock()
		defer mu.Unlock()
		if most < 1 || most > 2 {
			t.Fatalf("at most 2 of this worker's tasks running, saw %d", most)
		}
		if n := ws.Prefetching(); n != 0 {
			t.Fatalf("long tasks: %d held ahead", n)
		}
		t.Logf("short tasks: %d held ahead; long ones: at most %d running", wq.Prefetching(), most)
	})
}

// Two claims in flight on 3,000 tasks, the worker stopped mid-stream: every task ran once,
// every completion reported is recorded, the rest are available with no attempt counted.
func TestTwoClaimsInFlightEveryTaskOnceAndAStopMidStreamStrandsNothing(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		var specs []NewTask
		for i := 0; i < 3000; i++ {
			specs = append(specs, NewTask{Kind: "n", Payload: i, Queue: q})
		}
		ids := must(c.EnqueueMany(ctx, specs))
		w := must(NewWorker(WorkerOptions{Client: c, Queue: q, Concurrency: 4, Claims: 2, Wait: 200 * time.Millisecond, ReportInterval: -1}))
		var mu sync.Mutex
		seen := map[int64]int{}
		w.Register("n", func(ctx context.Context, job *Job) (interface{}, error) {
			var n int
			if err := job.Payload(&n); err != nil {
				return nil, err
			}
			mu.Lock()
			seen[job.ID()]++
			mu.Unlock()
			return n * 2, nil
		})
		runUntil(t, w, 60*time.Second, func() bool { return w.CompletedCount() >= 1000 })
		mu.Lock()
		defer mu.Unlock()
		w.mu.Lock()
		completed, lost := w.Completed, w.Lost
		w.mu.Unlock()
		if lost != 0 {
			t.Fatalf("%d reports answered other than ok", lost)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("task %d ran %d times", id, n)
			}
		}
		done := must(c.ListTasks(ctx, TaskFilter{Queue: q, State: "completed", Limit: 10000}))
		if int64(len(done.Tasks)) != completed {
			t.Fatalf("%d completions reported, %d recorded", completed, len(done.Tasks))
		}
		all := must(c.ListTasks(ctx, TaskFilter{Queue: q, Limit: 10000}))
		if len(all.Tasks) != len(ids) {
			t.Fatalf("listed %d of %d tasks", len(all.Tasks), len(ids))
		}
		var hurt []string
		for _, task := range all.Tasks {
			var ok bool
			if task.State == "completed" {
				var n int
				_ = json.Unmarshal(task.Payload, &n)
				ok = task.Attempt == 1 && string(task.Result) == strconv.Itoa(2*n) && seen[task.ID] == 1
			} else {
				ok = task.State == "available" && task.Attempt == 0
			}
			if !ok || len(task.Errors) != 0 {
				hurt = append(hurt, fmt.Sprintf("%d %s attempt %d", task.ID, task.State, task.Attempt))
			}
		}
		if len(hurt) > 0 {
			t.Fatalf("%d of %d tasks hurt by the stop: %v", len(hurt), len(ids), hurt)
		}
		t.Logf("stopped with %d of %d completed, the rest available", completed, len(ids))
	})
}

// Issue 37: a worker (concurrency 4) told to stop within ±30 ms of the moment 20 tasks become
// available, 30 times: every stop ends within its grace, no task is left running and none lost
// an attempt (a claim given up on is released by its claim_id).
func TestStopAsTasksArriveStrandsNothing(t *testing.T) {
	eachServerAtOnce(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		seed := uint32(37)
		rnd := func() int {
			seed = seed*1103515245 + 12345
			return int(seed>>16)%61 - 30
		}
		var ids []int64
		for round := 0; round < 30; round++ {
			wc, err := NewClient(Options{Server: c.server})
			if err != nil {
				t.Fatal(err)
			}
			w := must(NewWorker(WorkerOptions{Client: wc, Queue: q, Concurrency: 4, Wait: 5 * time.Second,
				ShutdownGrace: 5 * time.Second}))
			w.Register("k", func(ctx context.Context, job *Job) (interface{}, error) { return job.ID(), nil })
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- w.Run(rctx) }()
			time.Sleep(300 * time.Millisecond) // its claim is long-polling
			var specs []NewTask
			for i := 0; i < 20; i++ {
				specs = append(specs, NewTask{Kind: "k", Payload: i, Queue: q})
			}
			off := rnd()
			if off < 0 {
				stop()
				time.Sleep(time.Duration(-off) * time.Millisecond)
				for _, task := range must(c.EnqueueMany(ctx, specs)) {
					ids = append(ids, task.ID)
				}
			} else {
				made := make(chan []Task, 1)
				go func() { made <- must(c.EnqueueMany(ctx, specs)) }()
				time.Sleep(time.Duration(off) * time.Millisecond)
				stop()
				for _, task := range <-made {
					ids = append(ids, task.ID)
				}
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: the stop took over its 5 s grace", round)
			}
		}
		var hurt []string
		for _, id := range ids {
			got := must(c.GetTask(ctx, id))
			want := int32(0)
			if got.State == "completed" {
				want = 1
			}
			if (got.State != "available" && got.State != "completed") || got.Attempt != want || len(got.Errors) != 0 {
				hurt = append(hurt, fmt.Sprintf("%d %s attempt %d", id, got.State, got.Attempt))
			}
		}
		if len(hurt) > 0 {
			t.Fatalf("%d of %d tasks hurt by a stop: %v", len(hurt), len(ids), hurt)
		}
	})
}

// TestHelperWorker is a worker in its own process for TestSignals (run only by it).
func TestHelperWorker(t *testing.T) {
	if os.Getenv("DOCKET_HELPER_WORKER") == "" {
		t.Skip("run by TestSignals")
	}
	c := must(NewClient(Options{Server: os.Getenv("DOCKET_HELPER_SERVER")}))
	sleep, _ := time.ParseDuration(os.Getenv("DOCKET_HELPER_SLEEP"))
	lease, _ := time.ParseDuration(os.Getenv("DOCKET_HELPER_LEASE"))
	w := must(NewWorker(WorkerOptions{Client: c, Queue: os.Getenv("DOCKET_HELPER_QUEUE"), Concurrency: 4, Lease: lease, Wait: time.Second}))
	w.Register("slow", func(ctx context.Context, job *Job) (interface{}, error) {
		fmt.Printf("started %d\n", job.ID())
		time.Sleep(sleep)
		fmt.Printf("finished %d\n", job.ID())
		return "proc", nil
	})
	ctx, stop := signalContext()
	defer stop()
	_ = w.Run(ctx)
	fmt.Println("exited")
}

type helper struct {
	cmd     *exec.Cmd
	started chan int64
	lines   chan string
}

func spawn(t *testing.T, server, queue string, sleep, lease time.Duration) *helper {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorker$", "-test.v")
	cmd.Env = append(os.Environ(), "DOCKET_HELPER_WORKER=1", "DOCKET_HELPER_SERVER="+server, "DOCKET_HELPER_QUEUE="+queue,
		"DOCKET_HELPER_SLEEP="+sleep.String(), "DOCKET_HELPER_LEASE="+lease.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, started: make(chan int64, 100), lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "started ") {
				id, _ := strconv.ParseInt(strings.TrimPrefix(line, "started "), 10, 64)
				h.started <- id
			}
			h.lines <- line
		}
		close(h.lines)
	}()
	return h
}

func (h *helper) waitStarted(t *testing.T, n int) []int64 {
	var ids []int64
	timeout := time.After(20 * time.Second)
	for len(ids) < n {
		select {
		case id := <-h.started:
			ids = append(ids, id)
		case <-timeout:
			t.Fatalf("only %d of %d started", len(ids), n)
		}
	}
	return ids
}

func TestSignals(t *testing.T) {
	for backend, server := range servers(t) {
		server := server
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			c := must(NewClient(Options{Server: server}))
			// SIGKILL loses nothing: the rescuer takes the dead worker's tasks back.
			q := uniq()
			var specs []NewTask
			for i := 0; i < 4; i++ {
				specs = append(specs, NewTask{Kind: "slow", Payload: i, Queue: q, MaxAttempts: i32(5)})
			}
			tasks := must(c.EnqueueMany(ctx, specs))
			// A 3 s lease (a heartbeat a second): a busy machine does not lose it before the kill.
			a := spawn(t, server, q, 30*time.Second, 3*time.Second)
			a.waitStarted(t, 4)
			_ = a.cmd.Process.Kill()
			_ = a.cmd.Wait()
			b := spawn(t, server, q, 100*time.Millisecond, 5*time.Second)
			waitFor(t, 40*time.Second, func() bool {
				for _, task := range tasks {
					if must(c.GetTask(ctx, task.ID)).State != "completed" {
						return false
					}
				}
				return true
			})
			_ = b.cmd.Process.Signal(syscall.SIGTERM)
			if err := b.cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			for _, task := range tasks {
				got := must(c.GetTask(ctx, task.ID))
				if got.Attempt != 2 || got.Errors[0].Message != "lease expired" {
					t.Fatalf("%+v", got)
				}
			}
			// SIGTERM finishes what it holds and claims no more.
			q2 := uniq()
			specs = specs[:0]
			for i := 0; i < 6; i++ {
				specs = append(specs, NewTask{Kind: "slow", Payload: i, Queue: q2})
			}
			tasks = must(c.EnqueueMany(ctx, specs))
			d := spawn(t, server, q2, 1500*time.Millisecond, 30*time.Second)
			started := d.waitStarted(t, 4)
			_ = d.cmd.Process.Signal(syscall.SIGTERM)
			if err := d.cmd.Wait(); err != nil {
				t.Fatal(err)
			}
			var out []string
			for l := range d.lines {
				out = append(out, l)
			}
			if !strings.Contains(strings.Join(out, "\n"), "exited") {
				t.Fatalf("no clean exit: %v", out)
			}
			held := map[int64]bool{}
			for _, id := range started {
				held[id] = true
			}
			for _, task := range tasks {
				want := "available"
				if held[task.ID] {
					want = "completed"
				}
				if s := must(c.GetTask(ctx, task.ID)).State; s != want {
					t.Fatalf("task %d: %s, want %s", task.ID, s, want)
				}
			}
		})
	}
}

func TestProcessor(t *testing.T) {
	p := NewProcessor().
		On("init", func(r *ProcessorRequest) (*Result, error) {
			return &Result{Events: []NewEvent{{Payload: map[string]interface{}{"created": r.Args}}}, AuxState: map[string]int{"paid": 0},
				Response: "created", Action: Timer(time.Second, false)}, nil
		}).
		On("call", func(r *ProcessorRequest) (*Result, error) {
			var args struct {
				Amount int  `json:"amount"`
				Fail   bool `json:"fail"`
			}
			var aux struct {
				Paid int `json:"paid"`
			}
			_ = jsonUnmarshal(r.Args, &args)
			_ = jsonUnmarshal(r.Process.AuxState, &aux)
			if args.Fail {
				return nil, &ProcessorFailure{Value: map[string]string{"reason": "card declined"}}
			}
			var events []interface{}
			_ = r.Events(&events)
			paid := aux.Paid + args.Amount
			return &Result{Events: []NewEvent{{Payload: map[string]int{"paid": args.Amount}}}, AuxState: map[string]int{"paid": paid},
				Response: map[string]int{"paid": paid, "seen": len(events)}}, nil
		}).
		On("timeout", func(r *ProcessorRequest) (*Result, error) {
			return &Result{Events: []NewEvent{{Payload: "reminded"}}, Metadata: map[string]bool{"reminded": true}}, nil
		}).
		On("repair", func(r *ProcessorRequest) (*Result, error) { return &Result{Response: "repaired"}, nil })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	url := "http://" + l.Addr().String() + "/"
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		ns := uniq()
		if err := c.PutNamespace(ctx, ns, url, map[string]interface{}{"process_step_timeout": "10s"}); err != nil {
			t.Fatal(err)
		}
		var resp string
		if err := c.InitProcess(ctx, ns, "order-1", map[string]string{"sku": "x"}, &resp); err != nil || resp != "created" {
			t.Fatal(resp, err)
		}
		if err := c.InitProcess(ctx, ns, "order-1", nil, nil); !IsCode(err, "process_exists") {
			t.Fatal(err)
		}
		var paid map[string]int
		if err := c.CallProcess(ctx, ns, "order-1", map[string]int{"amount": 5}, &paid); err != nil || paid["paid"] != 5 || paid["seen"] != 1 {
			t.Fatal(paid, err)
		}
		if err := c.CallProcess(ctx, ns, "order-1", map[string]int{"amount": 7}, &paid); err != nil || paid["paid"] != 12 || paid["seen"] != 2 {
			t.Fatal(paid, err)
		}
		var view *ProcessView
		waitFor(t, 20*time.Second, func() bool {
			view = must(c.GetProcess(ctx, ns, "order-1"))
			return string(view.Process.Metadata) == `{"reminded":true}`
		})
		var payloads []string
		for _, e := range view.History {
			payloads = append(payloads, string(e.Payload))
		}
		if strings.Join(payloads, " ") != `{"created":{"sku":"x"}} {"paid":5} {"paid":7} "reminded"` {
			t.Fatal(payloads)
		}
		if err := c.CallProcess(ctx, ns, "order-1", map[string]bool{"fail": true}, nil); !IsCode(err, "processor_error") {
			t.Fatal(err)
		}
		if s := must(c.GetProcess(ctx, ns, "order-1")).Process.Status; s != "error" {
			t.Fatal(s)
		}
		if err := c.RepairProcess(ctx, ns, "order-1", map[string]int{}); err != nil {
			t.Fatal(err)
		}
		if s := must(c.GetProcess(ctx, ns, "order-1")).Process.Status; s != "running" {
			t.Fatal(s)
		}
		var kinds []string
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		err := c.Events(sctx, ns, 0, func(n Notification) bool {
			kinds = append(kinds, n.Kind)
			return n.Kind != "repaired"
		})
		events := strings.Count(strings.Join(kinds, " "), "event")
		if err != nil || kinds[0] != "created" || events != 4 || !strings.Contains(strings.Join(kinds, " "), "failed") {
			t.Fatal(kinds, err)
		}
	})
}

func TestTokensAndTLS(t *testing.T) {
	ctx := context.Background()
	url, ca, token := os.Getenv("DOCKET_TEST_TLS_URL"), os.Getenv("DOCKET_TEST_CA"), os.Getenv("DOCKET_TEST_TOKEN")
	admin := must(NewClient(Options{Server: url, Token: token, CAFile: ca}))
	created := must(admin.CreateToken(ctx, TokenCreateRequest{Name: "go-enqueue", Scopes: []string{"enqueue"}}))
	task := must(admin.Enqueue(ctx, NewTask{Kind: "tls", Payload: 1, Queue: "go-tls"}))
	if string(must(admin.GetTask(ctx, task.ID)).Payload) != "1" {
		t.Fatal("payload")
	}
	limited := must(NewClient(Options{Server: url, Token: created.Token, CAFile: ca}))
	must(limited.Enqueue(ctx, NewTask{Kind: "tls", Queue: "go-tls"}))
	if _, err := limited.ListTokens(ctx); !IsCode(err, "forbidden") {
		t.Fatal(err)
	}
	anon := must(NewClient(Options{Server: url, CAFile: ca}))
	anon.token = ""
	if _, err := anon.Enqueue(ctx, NewTask{Kind: "tls"}); !IsCode(err, "unauthenticated") {
		t.Fatal(err)
	}
	// The event stream's refusal carries docket's code too.
	if err := anon.Events(ctx, "", 0, func(Notification) bool { return false }); !IsCode(err, "unauthenticated") {
		t.Fatalf("events without a token: %v", err)
	}
	untrusting := must(NewClient(Options{Server: url, Token: token}))
	if _, err := untrusting.Status(ctx); err == nil || IsCode(err, "unknown") {
		t.Fatalf("a server signed by an untrusted CA was accepted: %v", err)
	}
	if err := admin.RevokeToken(ctx, "go-enqueue"); err != nil {
		t.Fatal(err)
	}
}

// A proxy answers the first three requests carrying completions (batched ones, and claims that
// report what finished) with 503: the worker sends them again while the leases last, and the
// tasks end completed at their first attempt.
func TestReportsAreRetriedWhileTheLeaseLasts(t *testing.T) {
	eachServer(t, func(t *testing.T, direct *Client) {
		ctx := context.Background()
		var mu sync.Mutex
		refused := 0
		target, _ := neturl.Parse(direct.server)
		proxy := httputil.NewSingleHostReverseProxy(target)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Refused: batched completions, and claims that carry completions.
			carries := r.URL.Path == "/v1/tasks/complete"
			if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/claim") {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				var fields map[string]json.RawMessage
				_ = json.Unmarshal(body, &fields)
				_, carries = fields["complete"]
			}
			if r.Method == "POST" && carries {
				mu.Lock()
				refuse := refused < 3
				if refuse {
					refused++
				}
				mu.Unlock()
				if refuse {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(503)
					_, _ = w.Write([]byte(`{"error": {"code": "unavailable", "message": "injected"}}`))
					return
				}
			}
			proxy.ServeHTTP(w, r)
		}))
		defer srv.Close()
		via := must(NewClient(Options{Server: srv.URL}))
		q := uniq()
		var specs []NewTask
		for i := 0; i < 5; i++ {
			specs = append(specs, NewTask{Kind: "ok", Payload: i, Queue: q})
		}
		tasks := must(direct.EnqueueMany(ctx, specs))
		w := must(NewWorker(WorkerOptions{Client: via, Queue: q, Concurrency: 5, Wait: 200 * time.Millisecond, Lease: 30 * time.Second}))
		w.Register("ok", func(ctx context.Context, job *Job) (interface{}, error) { return job.ID(), nil })
		runUntil(t, w, 30*time.Second, func() bool {
			for _, task := range tasks {
				if must(direct.GetTask(ctx, task.ID)).State != "completed" {
					return false
				}
			}
			return true
		})
		mu.Lock()
		defer mu.Unlock()
		if refused != 3 {
			t.Fatalf("refused %d", refused)
		}
		for _, task := range tasks {
			if got := must(direct.GetTask(ctx, task.ID)); got.Attempt != 1 || len(got.Errors) != 0 {
				t.Fatalf("%+v", got)
			}
		}
	})
}

func TestBatches(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		row := func(i int) NewTask { return NewTask{Kind: "row", Payload: i, Queue: q} }
		made := must(c.CreateBatch(ctx, NewBatch{Name: "import", Tasks: []NewTask{row(1), row(2)},
			Callbacks: Callbacks{Completed: &NewTask{Kind: "report", Queue: q + "-cb", Payload: map[string]string{"to": "ops"}}}}))
		if made.Batch.Total != 2 || made.Batch.Open || len(made.Tasks) != 2 || *made.Tasks[0].BatchID != made.Batch.ID {
			t.Fatalf("created: %+v", made)
		}
		if added := must(c.AddToBatch(ctx, made.Batch.ID, []NewTask{row(3)}, false)); added.Batch.Total != 3 {
			t.Fatalf("added: %+v", added.Batch)
		}
		got := must(c.Claim(ctx, q, ClaimRequest{Worker: "go", Limit: 10}))
		if len(got) != 3 {
			t.Fatalf("claimed %d", len(got))
		}
		var items []CompleteRequest
		for _, task := range got {
			items = append(items, CompleteRequest{ID: task.ID, Lease: task.Lease.Token})
		}
		must(c.CompleteMany(ctx, items))
		var done Batch
		waitFor(t, 20*time.Second, func() bool {
			done = must(c.GetBatch(ctx, made.Batch.ID))
			return done.SettledAt != nil
		})
		if done.Done != 3 || len(done.Fired) != 1 || done.Fired["completed"] == 0 {
			t.Fatalf("settled: %+v", done)
		}
		report := must(c.GetTask(ctx, done.Fired["completed"]))
		if !strings.Contains(string(report.Payload), `"completed":3`) {
			t.Fatalf("callback payload: %s", report.Payload)
		}
		found := false
		for _, b := range must(c.ListBatches(ctx, 100)) {
			found = found || b.ID == made.Batch.ID
		}
		if !found {
			t.Fatal("ListBatches misses the batch")
		}
		if _, err := c.AddToBatch(ctx, made.Batch.ID, []NewTask{row(4)}, false); !IsCode(err, "conflict") {
			t.Fatalf("want conflict, got %v", err)
		}
		open := must(c.CreateBatch(ctx, NewBatch{Open: true}))
		if !open.Batch.Open || must(c.SealBatch(ctx, open.Batch.ID)).Open {
			t.Fatalf("open/seal: %+v", open.Batch)
		}
	})
}

func TestBulk(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		var tasks []NewTask
		for i := 0; i < 30; i++ {
			tasks = append(tasks, NewTask{Kind: "k", Payload: i, Queue: q})
		}
		must(c.EnqueueMany(ctx, tasks))
		if n := must(c.CountBulk(ctx, "cancel", BulkFilter{Queue: q})); n.Total != 30 || n.More {
			t.Fatalf("count: %+v", n)
		}
		job := must(c.Bulk(ctx, "cancel", BulkFilter{Queue: q, States: []string{"available"}}))
		waitFor(t, 60*time.Second, func() bool {
			job = must(c.GetBulk(ctx, job.ID))
			return job.State == "completed"
		})
		if job.Done != 30 || job.Skipped != 0 || job.Action != "cancel" {
			t.Fatalf("done: %+v", job)
		}
		if _, err := c.Bulk(ctx, "retry", BulkFilter{Queue: q, States: []string{"running"}}); !IsCode(err, "invalid_request") {
			t.Fatalf("want invalid_request, got %v", err)
		}
	})
}

func TestFairQueue(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		if err := c.PutQueue(ctx, q, QueueSettings{Fair: true, PartitionWeights: map[string]int32{"b": 1}}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			must(c.Enqueue(ctx, NewTask{Kind: "a", Queue: q, PartitionKey: "a"}))
		}
		must(c.Enqueue(ctx, NewTask{Kind: "b", Queue: q, PartitionKey: "b"}))
		got := must(c.Claim(ctx, q, ClaimRequest{Worker: "go", Limit: 2}))
		if len(got) != 2 || got[0].Kind == got[1].Kind {
			t.Fatalf("fair claim: %+v", got)
		}
	})
}

// TestDeadLetterQueue: a task discarded after its last attempt is also enqueued in its queue's
// dead-letter queue with DeadLetterOf naming it; the original stays discarded and can be retried;
// a queue cannot be its own dead-letter queue (issue 43).
func TestDeadLetterQueue(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		dead := q + "-dead"
		if err := c.PutQueue(ctx, q, QueueSettings{DeadLetter: str(dead)}); err != nil {
			t.Fatal(err)
		}
		if qs := must(c.GetQueue(ctx, q)); qs.Settings.DeadLetter == nil || *qs.Settings.DeadLetter != dead {
			t.Fatalf("settings: %+v", qs.Settings)
		}
		task := must(c.Enqueue(ctx, NewTask{Kind: "charge", Payload: map[string]int{"order": 7}, Queue: q, MaxAttempts: i32(1)}))
		claimed := must(c.Claim(ctx, q, ClaimRequest{Worker: "go", Limit: 1}))
		if len(claimed) != 1 || claimed[0].ID != task.ID {
			t.Fatalf("claim: %+v", claimed)
		}
		must(c.Fail(ctx, task.ID, FailRequest{Lease: claimed[0].Lease.Token, Error: "card declined"}))
		letters := must(c.ListTasks(ctx, TaskFilter{Queue: dead, Limit: 100})).Tasks
		if len(letters) != 1 {
			t.Fatalf("dead letters: %+v", letters)
		}
		l := letters[0]
		if l.Kind != "charge" || string(l.Payload) != `{"order":7}` || l.State != "available" {
			t.Fatalf("dead letter: %+v", l)
		}
		of := l.DeadLetterOf
		if of == nil || of.TaskID != task.ID || of.Queue != q || of.Kind != "charge" || of.Attempts != 1 ||
			len(of.Errors) == 0 || of.Errors[0].Message != "card declined" || of.DiscardedAt.IsZero() {
			t.Fatalf("dead_letter_of: %+v", of)
		}
		if s := must(c.GetTask(ctx, task.ID)).State; s != "discarded" {
			t.Fatal(s)
		}
		if s := must(c.RetryTask(ctx, task.ID)).State; s != "available" {
			t.Fatal(s)
		}
		err := c.PutQueue(ctx, q, QueueSettings{DeadLetter: str(q)})
		var e *Error
		if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 {
			t.Fatalf("want a 4xx, got %v", err)
		}
	})
}

func TestRateLimits(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		name := "rl-" + q
		made := must(c.PutRateLimit(ctx, name, RateLimitSpec{Kind: "window", Limit: 2, Period: "1h"}))
		if made.Period != "1h" || made.Limit != 2 {
			t.Fatalf("made: %+v", made)
		}
		for i := 0; i < 3; i++ {
			must(c.Enqueue(ctx, NewTask{Kind: "call", Queue: q, RateLimit: name + ":acme"}))
		}
		if got := must(c.Claim(ctx, q, ClaimRequest{Worker: "go", Limit: 10})); len(got) != 2 || got[0].RateLimit != name+":acme" {
			t.Fatalf("first claim: %+v", got)
		}
		if got := must(c.Claim(ctx, q, ClaimRequest{Worker: "go", Limit: 10})); len(got) != 0 {
			t.Fatalf("over the limit: %+v", got)
		}
		l := must(c.GetRateLimit(ctx, name))
		if l.Admitted != 2 || l.Keys != 1 || l.Blocked != 1 {
			t.Fatalf("totals: %+v", l)
		}
		found := false
		for _, x := range must(c.ListRateLimits(ctx)) {
			found = found || x.Name == name
		}
		if !found {
			t.Fatal("ListRateLimits misses the limit")
		}
		if _, err := c.PutRateLimit(ctx, name, RateLimitSpec{Kind: "window", Limit: 2}); !IsCode(err, "invalid_request") {
			t.Fatalf("want invalid_request, got %v", err)
		}
		if err := c.DeleteRateLimit(ctx, name); err != nil {
			t.Fatal(err)
		}
		if got := must(c.Claim(ctx, q, ClaimRequest{Worker: "go", Limit: 10})); len(got) != 1 {
			t.Fatalf("after delete: %+v", got)
		}
	})
}

func TestWorkflows(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		made := must(c.CreateWorkflow(ctx, NewWorkflow{Name: "etl", Tasks: []WorkflowTask{
			{NewTask: NewTask{Kind: "extract", Queue: q}, Ref: "x"},
			{NewTask: NewTask{Kind: "load", Queue: q}, Ref: "y", DependsOn: []interface{}{"x"}},
		}}))
		if len(made.Workflow.Tasks) != 2 || made.Workflow.Tasks[0].Waiting || !made.Workflow.Tasks[1].Waiting {
			t.Fatalf("created: %+v", made.Workflow.Tasks)
		}
		first := must(c.Claim(ctx, q, ClaimRequest{Worker: "go", Limit: 10}))
		if len(first) != 1 || first[0].Kind != "extract" {
			t.Fatalf("first claim: %+v", first)
		}
		must(c.Complete(ctx, first[0].ID, CompleteRequest{Lease: first[0].Lease.Token, Result: map[string]int{"rows": 3}}))
		second := must(c.Claim(ctx, q, ClaimRequest{Worker: "go", Limit: 10, Wait: "10s"}))
		if len(second) != 1 || second[0].Kind != "load" || string(second[0].Deps["x"]) != `{"rows":3}` {
			t.Fatalf("second claim: %+v", second)
		}
		w := must(c.GetWorkflow(ctx, made.Workflow.Batch.ID))
		if w.Tasks[0].State != "completed" || w.Tasks[1].State != "running" {
			t.Fatalf("graph: %+v", w.Tasks)
		}
		wid := made.Workflow.Batch.ID
		added := must(c.AddToWorkflow(ctx, wid, WorkflowAddition{
			Tasks: []WorkflowTask{{NewTask: NewTask{Kind: "report", Queue: q}, Ref: "z", DependsOn: []interface{}{"y"}}},
			Workflows: []SubWorkflow{{Ref: "s", DependsOn: []interface{}{"z"},
				Tasks: []WorkflowTask{{NewTask: NewTask{Kind: "q", Queue: q}, Ref: "q"}}}},
		}))
		var refs []string
		for _, n := range added.Workflow.Tasks {
			refs = append(refs, n.Ref)
		}
		if fmt.Sprint(refs) != "[x y z s/q]" {
			t.Fatalf("added: %v", refs)
		}
		if must(c.CancelWorkflow(ctx, wid)).Batch.ID != wid {
			t.Fatal("cancel answered another workflow")
		}
		// z and s/q were cancelled; a retry makes them wait for y again.
		r := must(c.RetryWorkflow(ctx, wid))
		if len(r.Tasks) != 4 || r.Tasks[1].Waiting || !r.Tasks[2].Waiting || !r.Tasks[3].Waiting {
			t.Fatalf("retried: %+v", r.Tasks)
		}
		_, err := c.CreateWorkflow(ctx, NewWorkflow{Tasks: []WorkflowTask{{NewTask: NewTask{Kind: "a"}, Ref: "a", DependsOn: []interface{}{"a"}}}})
		if !IsCode(err, "invalid_request") {
			t.Fatalf("want invalid_request, got %v", err)
		}
	})
}
