// Package docket is the Go client, worker and processor helper for docket, the durable task
// scheduler: Client has every API operation, Worker runs handlers per kind (batched claims and
// reports, heartbeats, timeouts via context.Context, cancellation, graceful stop), and Processor
// answers docket's processor protocol for durable processes. Standard library only.
package docket

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Error is a non-2xx answer: docket's stable Code (not_found, lease_lost, cancelled,
// rate_limited…; the table in docs/src/api/index.md), the HTTP Status and the Message.
type Error struct {
	Status     int
	Code       string
	Message    string
	Details    json.RawMessage
	RetryAfter time.Duration // on 429
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s (HTTP %d)", e.Code, e.Message, e.Status) }

// IsCode reports whether err is a docket *Error with this code.
func IsCode(err error, code string) bool {
	var e *Error
	return asError(err, &e) && e.Code == code
}

func asError(err error, target **Error) bool {
	for err != nil {
		if e, ok := err.(*Error); ok {
			*target = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// Duration formats d for docket (whole milliseconds, e.g. "1500ms").
func Duration(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

var units = map[string]time.Duration{
	"ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond, "ms": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "m": time.Minute, "min": time.Minute,
	"mins": time.Minute, "h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "d": 24 * time.Hour,
	"day": 24 * time.Hour, "days": 24 * time.Hour, "w": 7 * 24 * time.Hour,
}

// ParseDuration reads docket's humantime durations ("1m 30s", "250ms", "2h").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var total time.Duration
	for s != "" {
		s = strings.TrimLeft(s, " ")
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		j := i
		for j < len(s) && s[j] != ' ' && (s[j] < '0' || s[j] > '9') {
			j++
		}
		n, err := strconv.ParseInt(s[:i], 10, 64)
		u, ok := units[s[i:j]]
		if err != nil || !ok {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		total += time.Duration(n) * u
		s = s[j:]
	}
	return total, nil
}

// Options configure a Client. Zero values: Server from $DOCKET_SERVER (else
// http://127.0.0.1:7070), Token from $DOCKET_TOKEN.
type Options struct {
	Server string
	Token  string
	// CAFile is a PEM file of CA certificates to trust for https:// (besides the system's).
	CAFile string
	// Timeout bounds one request, long polls excepted [30s].
	Timeout time.Duration
	// HTTPClient replaces the transport (CAFile is then ignored).
	HTTPClient *http.Client
}

// Client calls docket's HTTP API. It is safe for concurrent use.
type Client struct {
	server  string
	token   string
	timeout time.Duration
	http    *http.Client
}

// NewClient makes a Client; it fails only on an unreadable CA file.
func NewClient(o Options) (*Client, error) {
	c := &Client{server: o.Server, token: o.Token, timeout: o.Timeout, http: o.HTTPClient}
	if c.server == "" {
		c.server = os.Getenv("DOCKET_SERVER")
	}
	if c.server == "" {
		c.server = "http://127.0.0.1:7070"
	}
	c.server = strings.TrimRight(c.server, "/")
	if c.token == "" {
		c.token = os.Getenv("DOCKET_TOKEN")
	}
	if c.timeout == 0 {
		c.timeout = 30 * time.Second
	}
	if c.http == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 100
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("docket: CA file: %w", err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil || pool == nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("docket: no certificate in CA file %s", o.CAFile)
			}
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		c.http = &http.Client{Transport: tr}
	}
	return c, nil
}

func seg(s string) string { return url.PathEscape(s) }

// Do sends one request and decodes a JSON answer into out (nil: ignored). extra lengthens the
// timeout (long polls). It returns the response headers.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out interface{}, header http.Header, extra time.Duration) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout+extra)
	defer cancel()
	u := c.server + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "docket-client-go/0.1")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		return resp.Header, errorOf(resp, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.Header, fmt.Errorf("docket: decoding %s %s: %w", method, path, err)
		}
	}
	return resp.Header, nil
}

func (c *Client) call(ctx context.Context, method, path string, body, out interface{}) error {
	_, err := c.Do(ctx, method, path, nil, body, out, nil, 0)
	return err
}

// --- tasks -------------------------------------------------------------------------------

// Enqueue adds one task (POST /v1/tasks). With a unique key held by another unfinished task
// it returns that one with Inserted false; with a Debounce key held by a waiting task it
// replaces that one and returns it with Replaced true.
func (c *Client) Enqueue(ctx context.Context, t NewTask) (*Task, error) {
	var out Task
	return &out, c.call(ctx, "POST", "/v1/tasks", t, &out)
}

// EnqueueMany adds up to 10,000 tasks in one transaction.
func (c *Client) EnqueueMany(ctx context.Context, ts []NewTask) ([]Task, error) {
	var out struct {
		Tasks []Task `json:"tasks"`
	}
	err := c.call(ctx, "POST", "/v1/tasks", map[string]interface{}{"tasks": ts}, &out)
	return out.Tasks, err
}

// GetTask reads one task, with its Version (ETag).
func (c *Client) GetTask(ctx context.Context, id int64) (*Task, error) {
	var out Task
	h, err := c.Do(ctx, "GET", fmt.Sprintf("/v1/tasks/%d", id), nil, nil, &out, nil, 0)
	if err != nil {
		return nil, err
	}
	out.Version = h.Get("ETag")
	return &out, nil
}

// TaskFilter selects tasks for ListTasks; State may name several, comma-separated.
type TaskFilter struct {
	Queue, State, Kind, UserID, Text, ConcurrencyKey, Order string
	// TraceID, UniqueKey and Worker find tasks by those fields, Tag by one of their tags;
	// TraceID, Worker and Text read at most 100,000 ids per page (NextAfter goes on past them).
	TraceID, UniqueKey, Worker, Tag string
	Limit                           int
	After                           int64
}

// ListTasks reads a page of tasks by id (keyset paging: After = page.NextAfter).
func (c *Client) ListTasks(ctx context.Context, f TaskFilter) (*TaskPage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"queue": f.Queue, "state": f.State, "kind": f.Kind, "user_id": f.UserID,
		"text": f.Text, "concurrency_key": f.ConcurrencyKey, "order": f.Order, "trace_id": f.TraceID,
		"unique_key": f.UniqueKey, "worker": f.Worker, "tag": f.Tag} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.After > 0 {
		q.Set("after", strconv.FormatInt(f.After, 10))
	}
	var out TaskPage
	_, err := c.Do(ctx, "GET", "/v1/tasks", q, nil, &out, nil, 0)
	return &out, err
}

// UpdateTask changes a task; with a version (an ETag) it applies only at that version, else
// *Error version_mismatch (412).
func (c *Client) UpdateTask(ctx context.Context, id int64, p TaskPatch, version string) (*Task, error) {
	h := http.Header{}
	if version != "" {
		h.Set("If-Match", version)
	}
	var out Task
	rh, err := c.Do(ctx, "PATCH", fmt.Sprintf("/v1/tasks/%d", id), nil, p, &out, h, 0)
	if err != nil {
		return nil, err
	}
	out.Version = rh.Get("ETag")
	return &out, nil
}

func (c *Client) taskAction(ctx context.Context, id int64, action string) (*Task, error) {
	var out Task
	return &out, c.call(ctx, "POST", fmt.Sprintf("/v1/tasks/%d/%s", id, action), nil, &out)
}

// CancelTask cancels a waiting task at once, a running one at its next heartbeat or report.
func (c *Client) CancelTask(ctx context.Context, id int64) (*Task, error) {
	return c.taskAction(ctx, id, "cancel")
}

// Bulk asks for action ("cancel", "retry", "run-now", "delete") over every task f matches
// now (POST /v1/tasks/bulk, an admin token); it runs in the background: poll GetBulk.
func (c *Client) Bulk(ctx context.Context, action string, f BulkFilter) (BulkJob, error) {
	var out BulkJob
	body := map[string]interface{}{"action": action, "filter": f}
	return out, c.call(ctx, "POST", "/v1/tasks/bulk", body, &out)
}

// CountBulk is Bulk's dry run: how many tasks action would change now.
func (c *Client) CountBulk(ctx context.Context, action string, f BulkFilter) (BulkCount, error) {
	var out BulkCount
	body := map[string]interface{}{"action": action, "filter": f, "dry_run": true}
	return out, c.call(ctx, "POST", "/v1/tasks/bulk", body, &out)
}

// GetBulk reads a bulk action's progress (GET /v1/tasks/bulk/{id}).
func (c *Client) GetBulk(ctx context.Context, id int64) (BulkJob, error) {
	var out BulkJob
	return out, c.call(ctx, "GET", fmt.Sprintf("/v1/tasks/bulk/%d", id), nil, &out)
}

// RetryTask runs a finished task again.
func (c *Client) RetryTask(ctx context.Context, id int64) (*Task, error) {
	return c.taskAction(ctx, id, "retry")
}

// RunNow makes a scheduled or retryable task available now.
func (c *Client) RunNow(ctx context.Context, id int64) (*Task, error) {
	return c.taskAction(ctx, id, "run-now")
}

// --- the work path -----------------------------------------------------------------------

// Claim leases up to r.Limit tasks of queue, in full; r.Wait long-polls (≤ 60s). ClaimWith
// answers lean tasks (r.Lean) and the outcomes of r.Complete and r.Fail.
func (c *Client) Claim(ctx context.Context, queue string, r ClaimRequest) ([]Task, error) {
	out, err := c.ClaimWith(ctx, queue, r)
	if err != nil {
		return nil, err
	}
	return out.Tasks, nil
}

// ClaimWith claims as Claim and returns the whole answer: the tasks (in Lean with r.Lean) and
// the outcomes of r.Complete and r.Fail, recorded before the claim looked for work. One bad
// item refuses the whole request (*Error invalid_request, 400) and nothing is written.
func (c *Client) ClaimWith(ctx context.Context, queue string, r ClaimRequest) (*ClaimResponse, error) {
	var out ClaimResponse
	extra := time.Duration(0)
	if r.Wait != "" {
		if d, err := ParseDuration(r.Wait); err != nil || d > 0 {
			extra = 60 * time.Second
		}
	}
	if _, err := c.Do(ctx, "POST", "/v1/queues/"+seg(queue)+"/claim", nil, r, &out, nil, extra); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReleaseClaim hands back what a claim sent with claimID took (its answer never arrived):
// available again at once, no attempt counted — also when this arrives before the claim
// commits. It returns the ids handed back.
func (c *Client) ReleaseClaim(ctx context.Context, queue, claimID string) ([]int64, error) {
	var out ClaimReleased
	_, err := c.Do(ctx, "POST", "/v1/queues/"+seg(queue)+"/claims/"+seg(claimID)+"/release", nil, nil, &out, nil, 0)
	return out.Released, err
}

// ReleaseMany hands back tasks held but not started (no attempt counted): one outcome per
// item, ok or lease_lost.
func (c *Client) ReleaseMany(ctx context.Context, items []ReleaseItem) ([]ItemOutcome, error) {
	var out struct {
		Results []ItemOutcome `json:"results"`
	}
	_, err := c.Do(ctx, "POST", "/v1/tasks/release", nil, map[string]interface{}{"items": items}, &out, nil, 0)
	return out.Results, err
}

// Heartbeat extends a lease (and records progress); *Error cancelled/lease_lost/timed_out
// (409) when the task is no longer the caller's.
func (c *Client) Heartbeat(ctx context.Context, id int64, r HeartbeatRequest) (*Task, error) {
	var out Task
	return &out, c.call(ctx, "POST", fmt.Sprintf("/v1/tasks/%d/heartbeat", id), r, &out)
}

// Complete finishes a task (or hands it to r.NextStage).
func (c *Client) Complete(ctx context.Context, id int64, r CompleteRequest) (*Task, error) {
	var out Task
	r.ID = 0
	return &out, c.call(ctx, "POST", fmt.Sprintf("/v1/tasks/%d/complete", id), r, &out)
}

// Fail fails an attempt: retried per the backoff (or after RetryIn), discarded when Permanent.
func (c *Client) Fail(ctx context.Context, id int64, r FailRequest) (*Task, error) {
	var out Task
	r.ID = 0
	return &out, c.call(ctx, "POST", fmt.Sprintf("/v1/tasks/%d/fail", id), r, &out)
}

// CompleteMany completes many (each item with its ID) → one outcome per item.
func (c *Client) CompleteMany(ctx context.Context, items []CompleteRequest) ([]ItemOutcome, error) {
	var out struct {
		Results []ItemOutcome `json:"results"`
	}
	err := c.call(ctx, "POST", "/v1/tasks/complete", map[string]interface{}{"items": items}, &out)
	return out.Results, err
}

// FailMany fails many (each item with its ID) → one outcome per item.
func (c *Client) FailMany(ctx context.Context, items []FailRequest) ([]ItemOutcome, error) {
	var out struct {
		Results []ItemOutcome `json:"results"`
	}
	err := c.call(ctx, "POST", "/v1/tasks/fail", map[string]interface{}{"items": items}, &out)
	return out.Results, err
}

// ReportWorker sends a worker's report (POST /v1/workers/{name}/report).
func (c *Client) ReportWorker(ctx context.Context, name string, r WorkerReport) error {
	return c.call(ctx, "POST", "/v1/workers/"+seg(name)+"/report", r, nil)
}

// ListWorkers lists the workers that report.
func (c *Client) ListWorkers(ctx context.Context) ([]WorkerView, error) {
	var out struct {
		Workers []WorkerView `json:"workers"`
	}
	return out.Workers, c.call(ctx, "GET", "/v1/workers", nil, &out)
}

// --- queues and schedules ------------------------------------------------------------------

// ListQueues lists queues with their counts.
func (c *Client) ListQueues(ctx context.Context) ([]QueueStats, error) {
	var out struct {
		Queues []QueueStats `json:"queues"`
	}
	return out.Queues, c.call(ctx, "GET", "/v1/queues", nil, &out)
}

// GetQueue reads a queue's settings and counts.
func (c *Client) GetQueue(ctx context.Context, queue string) (*QueueStats, error) {
	var out QueueStats
	return &out, c.call(ctx, "GET", "/v1/queues/"+seg(queue), nil, &out)
}

// PutQueue sets a queue's settings.
func (c *Client) PutQueue(ctx context.Context, queue string, s QueueSettings) error {
	return c.call(ctx, "PUT", "/v1/queues/"+seg(queue), s, nil)
}

// PauseQueue pauses a queue; ResumeQueue resumes it.
func (c *Client) PauseQueue(ctx context.Context, queue string) error {
	return c.call(ctx, "POST", "/v1/queues/"+seg(queue)+"/pause", nil, nil)
}

// ResumeQueue resumes a paused queue.
func (c *Client) ResumeQueue(ctx context.Context, queue string) error {
	return c.call(ctx, "POST", "/v1/queues/"+seg(queue)+"/resume", nil, nil)
}

// CreateBatch creates a batch: its tasks in one transaction, and callback tasks enqueued once
// when every task finished (POST /v1/batches).
func (c *Client) CreateBatch(ctx context.Context, b NewBatch) (BatchCreated, error) {
	var out BatchCreated
	return out, c.call(ctx, "POST", "/v1/batches", b, &out)
}

// AddToBatch adds tasks to a batch that has not settled, and seals it when seal is true; a
// settled batch answers conflict.
func (c *Client) AddToBatch(ctx context.Context, id int64, tasks []NewTask, seal bool) (BatchCreated, error) {
	var out BatchCreated
	body := map[string]interface{}{"tasks": tasks, "seal": seal}
	return out, c.call(ctx, "POST", fmt.Sprintf("/v1/batches/%d/tasks", id), body, &out)
}

// SealBatch seals an open batch.
func (c *Client) SealBatch(ctx context.Context, id int64) (Batch, error) {
	var out Batch
	return out, c.call(ctx, "POST", fmt.Sprintf("/v1/batches/%d/seal", id), nil, &out)
}

// GetBatch reads a batch and its progress.
func (c *Client) GetBatch(ctx context.Context, id int64) (Batch, error) {
	var out Batch
	return out, c.call(ctx, "GET", fmt.Sprintf("/v1/batches/%d", id), nil, &out)
}

// ListBatches lists batches, newest first (limit 0: the server's default).
func (c *Client) ListBatches(ctx context.Context, limit int) ([]Batch, error) {
	var out struct {
		Batches []Batch `json:"batches"`
	}
	path := "/v1/batches"
	if limit > 0 {
		path += fmt.Sprintf("?limit=%d", limit)
	}
	return out.Batches, c.call(ctx, "GET", path, nil, &out)
}

// CreateWorkflow creates a workflow: tasks with dependencies, in one transaction
// (POST /v1/workflows).
func (c *Client) CreateWorkflow(ctx context.Context, w NewWorkflow) (WorkflowCreated, error) {
	var out WorkflowCreated
	return out, c.call(ctx, "POST", "/v1/workflows", w, &out)
}

// GetWorkflow reads a workflow: its batch and the state of each task.
func (c *Client) GetWorkflow(ctx context.Context, id int64) (Workflow, error) {
	var out Workflow
	return out, c.call(ctx, "GET", fmt.Sprintf("/v1/workflows/%d", id), nil, &out)
}

// CancelWorkflow cancels every unfinished task of a workflow.
func (c *Client) CancelWorkflow(ctx context.Context, id int64) (Workflow, error) {
	var out Workflow
	return out, c.call(ctx, "POST", fmt.Sprintf("/v1/workflows/%d/cancel", id), nil, &out)
}

// AddToWorkflow adds tasks (and sub-workflows) to a running workflow (POST
// /v1/workflows/{id}/tasks): fan-out decided at run time.
func (c *Client) AddToWorkflow(ctx context.Context, id int64, a WorkflowAddition) (WorkflowCreated, error) {
	var out WorkflowCreated
	return out, c.call(ctx, "POST", fmt.Sprintf("/v1/workflows/%d/tasks", id), a, &out)
}

// RetryWorkflow re-runs a workflow's discarded and cancelled tasks, those with dependencies
// once these complete (POST /v1/workflows/{id}/retry).
func (c *Client) RetryWorkflow(ctx context.Context, id int64) (Workflow, error) {
	var out Workflow
	return out, c.call(ctx, "POST", fmt.Sprintf("/v1/workflows/%d/retry", id), nil, &out)
}

// PutRateLimit creates or replaces rate limit name (admin): kind window or bucket (with a
// Period), or concurrent. Tasks name it in RateLimit ("name" or "name:partition").
func (c *Client) PutRateLimit(ctx context.Context, name string, s RateLimitSpec) (RateLimit, error) {
	var out RateLimit
	return out, c.call(ctx, "PUT", "/v1/rate-limits/"+seg(name), s, &out)
}

// GetRateLimit reads a rate limit with its totals.
func (c *Client) GetRateLimit(ctx context.Context, name string) (RateLimit, error) {
	var out RateLimit
	return out, c.call(ctx, "GET", "/v1/rate-limits/"+seg(name), nil, &out)
}

// ListRateLimits lists every rate limit, by name.
func (c *Client) ListRateLimits(ctx context.Context) ([]RateLimit, error) {
	var out RateLimitList
	err := c.call(ctx, "GET", "/v1/rate-limits", nil, &out)
	return out.RateLimits, err
}

// DeleteRateLimit deletes a rate limit (admin); its tasks run unlimited.
func (c *Client) DeleteRateLimit(ctx context.Context, name string) error {
	return c.call(ctx, "DELETE", "/v1/rate-limits/"+seg(name), nil, nil)
}

// PutSchedule creates or replaces a schedule.
func (c *Client) PutSchedule(ctx context.Context, s ScheduleSpec) (Schedule, error) {
	var out Schedule
	return out, c.call(ctx, "POST", "/v1/schedules", s, &out)
}

// GetSchedule reads a schedule.
func (c *Client) GetSchedule(ctx context.Context, name string) (Schedule, error) {
	var out Schedule
	return out, c.call(ctx, "GET", "/v1/schedules/"+seg(name), nil, &out)
}

// ListSchedules lists schedules.
func (c *Client) ListSchedules(ctx context.Context) ([]Schedule, error) {
	var out struct {
		Schedules []Schedule `json:"schedules"`
	}
	return out.Schedules, c.call(ctx, "GET", "/v1/schedules", nil, &out)
}

// DeleteSchedule deletes a schedule.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.call(ctx, "DELETE", "/v1/schedules/"+seg(name), nil, nil)
}

// PauseSchedule pauses a schedule.
func (c *Client) PauseSchedule(ctx context.Context, name string) error {
	return c.call(ctx, "POST", "/v1/schedules/"+seg(name)+"/pause", nil, nil)
}

// ResumeSchedule resumes a schedule.
func (c *Client) ResumeSchedule(ctx context.Context, name string) error {
	return c.call(ctx, "POST", "/v1/schedules/"+seg(name)+"/resume", nil, nil)
}

// --- processes -----------------------------------------------------------------------------

// PutNamespace sets a namespace's processor URL and settings (NamespaceConfig fields in config).
func (c *Client) PutNamespace(ctx context.Context, ns, processorURL string, config map[string]interface{}) error {
	body := map[string]interface{}{"processor": map[string]string{"url": processorURL}}
	for k, v := range config {
		body[k] = v
	}
	return c.call(ctx, "PUT", "/v1/namespaces/"+seg(ns), body, nil)
}

// InitProcess runs the processor's init; the processor's response goes into out.
func (c *Client) InitProcess(ctx context.Context, ns, id string, args interface{}, out interface{}) error {
	var r struct {
		Response json.RawMessage `json:"response"`
	}
	if err := c.call(ctx, "POST", "/v1/namespaces/"+seg(ns)+"/processes", map[string]interface{}{"id": id, "args": args}, &r); err != nil {
		return err
	}
	return decodeInto(r.Response, out)
}

// CallProcess makes a synchronous call; the processor's response goes into out.
func (c *Client) CallProcess(ctx context.Context, ns, id string, args interface{}, out interface{}) error {
	var r struct {
		Response json.RawMessage `json:"response"`
	}
	if err := c.call(ctx, "POST", "/v1/namespaces/"+seg(ns)+"/processes/"+seg(id)+"/call", map[string]interface{}{"args": args}, &r); err != nil {
		return err
	}
	return decodeInto(r.Response, out)
}

// RepairProcess repairs an error process through the processor.
func (c *Client) RepairProcess(ctx context.Context, ns, id string, args interface{}) error {
	return c.call(ctx, "POST", "/v1/namespaces/"+seg(ns)+"/processes/"+seg(id)+"/repair", map[string]interface{}{"args": args}, nil)
}

// GetProcess reads a process with its history.
func (c *Client) GetProcess(ctx context.Context, ns, id string) (*ProcessView, error) {
	var out ProcessView
	return &out, c.call(ctx, "GET", "/v1/namespaces/"+seg(ns)+"/processes/"+seg(id), nil, &out)
}

// TraceProcess reads a process's tasks and their runs (raw JSON: schema ProcessTrace).
func (c *Client) TraceProcess(ctx context.Context, ns, id string) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.call(ctx, "GET", "/v1/namespaces/"+seg(ns)+"/processes/"+seg(id)+"/trace", nil, &out)
}

func decodeInto(raw json.RawMessage, out interface{}) error {
	if out == nil || len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// Events follows GET /v1/events (server-sent events) from after (0: the start), calling fn for
// each notification in order, reconnecting after the last seq seen, until ctx ends or fn
// returns false. It returns ctx's error, or nil when fn stopped it.
func (c *Client) Events(ctx context.Context, namespace string, after int64, fn func(Notification) bool) error {
	for {
		q := url.Values{}
		if namespace != "" {
			q.Set("namespace", namespace)
		}
		if after > 0 {
			q.Set("after", strconv.FormatInt(after, 10))
		}
		req, err := http.NewRequestWithContext(ctx, "GET", c.server+"/v1/events?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(time.Second)
			continue
		}
		if resp.StatusCode >= 400 {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			return errorOf(resp, data)
		}
		stop := false
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64*1024), 4<<20)
		var data []string
		for !stop && sc.Scan() {
			line := sc.Text()
			if line != "" {
				if strings.HasPrefix(line, "data:") {
					data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
				}
				continue
			}
			var n Notification
			if len(data) > 0 && json.Unmarshal([]byte(strings.Join(data, "\n")), &n) == nil && n.Seq > 0 {
				after = n.Seq
				stop = !fn(n)
			}
			data = data[:0]
		}
		resp.Body.Close()
		if stop {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// --- tokens and the cluster ----------------------------------------------------------------

// CreateToken creates an API token (admin); the secret is in the answer once.
func (c *Client) CreateToken(ctx context.Context, r TokenCreateRequest) (*TokenCreated, error) {
	var out TokenCreated
	return &out, c.call(ctx, "POST", "/v1/tokens", r, &out)
}

// ListTokens lists tokens (admin).
func (c *Client) ListTokens(ctx context.Context) ([]TokenView, error) {
	var out struct {
		Tokens []TokenView `json:"tokens"`
	}
	return out.Tokens, c.call(ctx, "GET", "/v1/tokens", nil, &out)
}

// RevokeToken revokes a token (admin).
func (c *Client) RevokeToken(ctx context.Context, name string) error {
	return c.call(ctx, "DELETE", "/v1/tokens/"+seg(name), nil, nil)
}

// Status reads the cluster at a glance (raw JSON: schema StatusView).
func (c *Client) Status(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.call(ctx, "GET", "/v1/status", nil, &out)
}

// errorOf is the *Error of a refused request: docket's error code, message and details from
// the body {"error": {...}}, else code "unknown" and the body as the message.
func errorOf(resp *http.Response, data []byte) *Error {
	e := &Error{Status: resp.StatusCode, Code: "unknown", Message: strings.TrimSpace(string(data))}
	var wrap struct {
		Error struct {
			Code    string          `json:"code"`
			Message string          `json:"message"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &wrap) == nil && wrap.Error.Code != "" {
		e.Code, e.Message, e.Details = wrap.Error.Code, wrap.Error.Message, wrap.Error.Details
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = time.Duration(ra) * time.Second
	}
	return e
}
