package docket

// Durable functions: workflows written as Go code (docs/src/durable/go.md). A workflow run is
// driven by one docket task of the workflow queue; the worker runs the registered function from
// the top on every execution, answering each durable call (Step, Sleep, WaitForEvent, Now, …)
// from the run's journal while it lasts and recording the new ones on the server.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math/rand"
	"net/url"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
)

// WorkflowRun is one execution of a workflow (a "run"), as docket stores it.
type WorkflowRun struct {
	ID       string `json:"id"`
	Workflow string `json:"workflow"`
	Queue    string `json:"queue"`
	// State: running, sleeping, waiting, completed, failed or cancelled.
	State      string          `json:"state"`
	Input      json.RawMessage `json:"input"`
	Result     json.RawMessage `json:"result"`
	Error      *string         `json:"error"`
	ParentID   *string         `json:"parent_id"`
	TaskID     int64           `json:"task_id"`
	Steps      int             `json:"steps"`
	WaitingFor *string         `json:"waiting_for"`
	WakeAt     *time.Time      `json:"wake_at"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	// Created: StartWorkflow made this run (false: a run of that id existed). Not a JSON field.
	Created bool `json:"-"`
}

// Finished reports whether the run is over: completed, failed or cancelled.
func (r *WorkflowRun) Finished() bool { return terminalRunState(r.State) }

// Decode decodes the run's result into v.
func (r *WorkflowRun) Decode(v interface{}) error { return json.Unmarshal(r.Result, v) }

func terminalRunState(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }

// JournalEntry is one recorded durable call of a run (its journal), numbered by Seq in call
// order. Kind: step, sleep, event, child, now, random, uuid or patch; State: completed,
// failed, waiting or timed_out.
type JournalEntry struct {
	Seq        int             `json:"seq"`
	Kind       string          `json:"kind"`
	Name       string          `json:"name"`
	State      string          `json:"state"`
	Output     json.RawMessage `json:"output"`
	Error      *string         `json:"error"`
	Attempts   int             `json:"attempts"`
	ChildID    *string         `json:"child_id"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	WakeAt     *time.Time      `json:"wake_at"`
}

// StartOptions are StartWorkflow's options; zero values take the server's defaults.
type StartOptions struct {
	// ID names the run (1 to 200 characters): starting the same id again returns that run
	// (Created false). Empty: the server makes a UUID.
	ID string
	// Queue is the queue of the run's task ["workflows"].
	Queue    string
	Priority *int32
	// MaxAttempts: how often the run's task may crash or time out and be run again (each time
	// a replay) [25].
	MaxAttempts *int32
	// Timeout is the run's task's attempt timeout: how long one execution (a claim to a
	// suspension or the end) may take [the queue's].
	Timeout time.Duration
}

// StartWorkflow starts a run of workflow with input (any JSON-encodable value; nil: null).
// With an ID that names a run already, it returns that run with Created false (*Error
// conflict when that run is of another workflow).
func (c *Client) StartWorkflow(ctx context.Context, workflow string, input interface{}, o StartOptions) (*WorkflowRun, error) {
	body := map[string]interface{}{"workflow": workflow, "input": input}
	if o.ID != "" {
		body["id"] = o.ID
	}
	if o.Queue != "" {
		body["queue"] = o.Queue
	}
	if o.Priority != nil {
		body["priority"] = *o.Priority
	}
	if o.MaxAttempts != nil {
		body["max_attempts"] = *o.MaxAttempts
	}
	if o.Timeout > 0 {
		body["timeout"] = Duration(o.Timeout)
	}
	var out struct {
		Run     WorkflowRun `json:"run"`
		Created bool        `json:"created"`
	}
	if err := c.call(ctx, "POST", "/v1/workflow-runs", body, &out); err != nil {
		return nil, err
	}
	out.Run.Created = out.Created
	return &out.Run, nil
}

// WorkflowRun reads a run (*Error not_found).
func (c *Client) WorkflowRun(ctx context.Context, id string) (*WorkflowRun, error) {
	var out WorkflowRun
	if err := c.call(ctx, "GET", "/v1/workflow-runs/"+seg(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkflowResult reads a run once it has finished, waiting up to wait for that (long polls
// of at most 60 s each); after wait it returns the run as it is: check Finished (or State).
func (c *Client) WorkflowResult(ctx context.Context, id string, wait time.Duration) (*WorkflowRun, error) {
	end := time.Now().Add(wait)
	for {
		chunk := time.Until(end)
		if chunk > 60*time.Second {
			chunk = 60 * time.Second
		}
		if chunk < 0 {
			chunk = 0
		}
		var out WorkflowRun
		q := url.Values{"wait": {Duration(chunk)}}
		if _, err := c.Do(ctx, "GET", "/v1/workflow-runs/"+seg(id)+"/result", q, nil, &out, nil, chunk); err != nil {
			return nil, err
		}
		if out.Finished() || !time.Now().Before(end) {
			return &out, nil
		}
	}
}

// WorkflowSteps reads a run's journal.
func (c *Client) WorkflowSteps(ctx context.Context, id string) ([]JournalEntry, error) {
	var out struct {
		Steps []JournalEntry `json:"steps"`
	}
	err := c.call(ctx, "GET", "/v1/workflow-runs/"+seg(id)+"/steps", nil, &out)
	return out.Steps, err
}

// EventSent answers SendEvent: the event's id, and whether a run waiting for it was woken.
type EventSent struct {
	ID        int64 `json:"id"`
	Delivered bool  `json:"delivered"`
}

// SendEvent sends the event name with payload to run runID: it waits in the run's mailbox
// until a WaitForEvent of that name takes it (oldest first). Names starting "docket:" are
// refused; a finished run answers *Error invalid_state (409).
func (c *Client) SendEvent(ctx context.Context, runID, name string, payload interface{}) (*EventSent, error) {
	var out EventSent
	body := map[string]interface{}{"name": name, "payload": payload}
	if err := c.call(ctx, "POST", "/v1/workflow-runs/"+seg(runID)+"/events", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelWorkflowRun cancels a run and its unfinished children. (CancelWorkflow cancels a
// task workflow of /v1/workflows.)
func (c *Client) CancelWorkflowRun(ctx context.Context, id string) (*WorkflowRun, error) {
	var out WorkflowRun
	if err := c.call(ctx, "POST", "/v1/workflow-runs/"+seg(id)+"/cancel", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RetryWorkflowRun runs a failed or cancelled run again: a replay with its journal (after a
// fix to the code, for a non-determinism error). (RetryWorkflow retries a task workflow.)
func (c *Client) RetryWorkflowRun(ctx context.Context, id string) (*WorkflowRun, error) {
	var out WorkflowRun
	if err := c.call(ctx, "POST", "/v1/workflow-runs/"+seg(id)+"/retry", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkflowRunFilter selects runs for ListWorkflowRuns; zero values select everything.
type WorkflowRunFilter struct {
	Workflow, State, ParentID   string
	CreatedAfter, CreatedBefore *time.Time
	Limit                       int
}

// ListWorkflowRuns lists runs, newest first.
func (c *Client) ListWorkflowRuns(ctx context.Context, f WorkflowRunFilter) ([]WorkflowRun, error) {
	q := url.Values{}
	for k, v := range map[string]string{"workflow": f.Workflow, "state": f.State, "parent_id": f.ParentID} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.CreatedAfter != nil {
		q.Set("created_after", f.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	if f.CreatedBefore != nil {
		q.Set("created_before", f.CreatedBefore.UTC().Format(time.RFC3339Nano))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out struct {
		Runs []WorkflowRun `json:"runs"`
	}
	_, err := c.Do(ctx, "GET", "/v1/workflow-runs", q, nil, &out, nil, 0)
	return out.Runs, err
}

// --- what a worker sends while it drives a run (the task's lease proves it holds it) -------

// entryOut is a journal entry as the worker records it.
type entryOut struct {
	Seq       int             `json:"seq"`
	Kind      string          `json:"kind"`
	Name      string          `json:"name"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     *string         `json:"error,omitempty"`
	Attempts  int             `json:"attempts,omitempty"`
	StartedAt *time.Time      `json:"started_at,omitempty"`
	Child     *childOut       `json:"child,omitempty"`
}

type childOut struct {
	ID    string          `json:"id"`
	Input json.RawMessage `json:"input"`
	Queue string          `json:"queue,omitempty"`
}

// waitOut is what a suspend waits for.
type waitOut struct {
	Seq     int        `json:"seq"`
	Kind    string     `json:"kind"`
	Name    string     `json:"name"`
	Until   *time.Time `json:"until,omitempty"`
	Timeout string     `json:"timeout,omitempty"`
	ChildID string     `json:"child_id,omitempty"`
}

type resumeAnswer struct {
	Run   WorkflowRun    `json:"run"`
	Steps []JournalEntry `json:"steps"`
	Now   time.Time      `json:"now"`
}

type suspendAnswer struct {
	Outcome string          `json:"outcome"`
	Payload json.RawMessage `json:"payload"`
	Entry   *JournalEntry   `json:"entry"`
}

// workflowServer is what a workflow execution calls (a *Client; a fake in the unit tests).
type workflowServer interface {
	wfResume(ctx context.Context, id, lease string) (*resumeAnswer, error)
	wfRecord(ctx context.Context, id, lease string, steps []entryOut) error
	wfSuspend(ctx context.Context, id, lease string, steps []entryOut, wait waitOut) (*suspendAnswer, error)
	wfFinish(ctx context.Context, id, lease string, steps []entryOut, result json.RawMessage, errMsg *string) error
}

func nonNil(steps []entryOut) []entryOut {
	if steps == nil {
		return []entryOut{}
	}
	return steps
}

func (c *Client) wfResume(ctx context.Context, id, lease string) (*resumeAnswer, error) {
	var out resumeAnswer
	if err := c.call(ctx, "POST", "/v1/workflow-runs/"+seg(id)+"/resume", map[string]string{"lease": lease}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) wfRecord(ctx context.Context, id, lease string, steps []entryOut) error {
	body := map[string]interface{}{"lease": lease, "steps": nonNil(steps)}
	return c.call(ctx, "POST", "/v1/workflow-runs/"+seg(id)+"/steps", body, nil)
}

func (c *Client) wfSuspend(ctx context.Context, id, lease string, steps []entryOut, wait waitOut) (*suspendAnswer, error) {
	var out suspendAnswer
	body := map[string]interface{}{"lease": lease, "steps": nonNil(steps), "wait": wait}
	if err := c.call(ctx, "POST", "/v1/workflow-runs/"+seg(id)+"/suspend", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) wfFinish(ctx context.Context, id, lease string, steps []entryOut, result json.RawMessage, errMsg *string) error {
	body := map[string]interface{}{"lease": lease, "steps": nonNil(steps)}
	if errMsg != nil {
		body["error"] = *errMsg
	} else {
		if result == nil {
			result = json.RawMessage("null")
		}
		body["result"] = result
	}
	return c.call(ctx, "POST", "/v1/workflow-runs/"+seg(id)+"/finish", body, nil)
}

// --- errors ---------------------------------------------------------------------------------

// StepFailed is what Step returns when its function failed MaxAttempts times (or returned a
// Permanent error): recorded, so a replay returns the same. Err is the last error (nil on a
// replay: only its message is recorded).
type StepFailed struct {
	Name     string
	Message  string
	Attempts int
	Err      error
}

func (e *StepFailed) Error() string {
	return fmt.Sprintf("step '%s' failed after %d attempt(s): %s", e.Name, e.Attempts, e.Message)
}

func (e *StepFailed) Unwrap() error { return e.Err }

// ChildFailed is what ChildRun.Result returns when the child run failed or was cancelled.
type ChildFailed struct {
	ID, Workflow string
	State        string // failed or cancelled
	Message      string
}

func (e *ChildFailed) Error() string {
	return fmt.Sprintf("child workflow %s run %s %s: %s", e.Workflow, e.ID, e.State, e.Message)
}

// NonDeterminismError is why a run fails when its code asks, at a point of its journal, for
// another durable call than the one recorded there (the code changed under a running run: use
// Patched). The run fails with its message — docket's own wording (docket_core::durable::
// replay_conflict): `non-determinism: workflow checkout run r1: journal entry 2 is step
// "charge" but the code asked for step "refund"`; RetryWorkflowRun runs it again after a fix.
type NonDeterminismError struct {
	Workflow, RunID string
	Seq             int
	// Recorded and Asked: `step "charge"`, `sleep "sleep"`, … (empty when docket refused the
	// call: Message has docket's message then).
	Recorded, Asked string
	Message         string
}

func (e *NonDeterminismError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("non-determinism: workflow %s run %s: journal entry %d is %s but the code asked for %s",
		e.Workflow, e.RunID, e.Seq, e.Recorded, e.Asked)
}

// --- the workflow context -------------------------------------------------------------------

// WorkflowFunc is a workflow: deterministic code whose side effects are in Steps. Return the
// run's result (any JSON-encodable value) or an error (the run fails with its message).
type WorkflowFunc func(wf *WorkflowContext, input json.RawMessage) (interface{}, error)

// StepOptions configure a Step's retries in the worker's process; zero values take the
// defaults in brackets.
type StepOptions struct {
	MaxAttempts int           // runs of the function at most [3]
	Backoff     time.Duration // the first pause between attempts, doubled each time [1s]
	MaxBackoff  time.Duration // the longest pause [60s]
}

// ChildOptions configure StartChild.
type ChildOptions struct {
	ID    string // the child run's id ["<parent id>:<seq>"]
	Queue string // the child run's queue [the parent's]
}

// why a workflow goroutine ended without returning
type exitReason int

const (
	exitNone      exitReason = iota
	exitSuspended            // the run sleeps or waits: the server handed the task back
	exitStopped              // the task is no longer ours (lease lost, cancelled, stopped)
	exitFail                 // the run must fail with exitErr (non-determinism, a refused call)
)

// WorkflowContext is what a workflow function gets: its durable calls. Call its methods only
// from the workflow function's own goroutine — when a run suspends (a Sleep, a wait) or its
// task is no longer the worker's, the call ends that goroutine (runtime.Goexit: deferred
// functions run, nothing after the call does), so the function needs no error plumbing for it.
type WorkflowContext struct {
	ctx      context.Context
	srv      workflowServer
	workflow string
	runID    string
	queue    string // the run's queue (its task's): a child's, unless it names one
	lease    string
	attempt  int32
	input    json.RawMessage
	journal  map[int]JournalEntry
	length   int // entries in the journal (the replay lasts while seq < length)
	now      time.Time
	seq      int
	pending  []entryOut
	exit     exitReason
	exitErr  error
	inStep   string // the step whose function runs now (durable calls are refused there)
	logger   *log.Logger
	sleep    func(ctx context.Context, d time.Duration) bool // false: ctx ended
}

func newWorkflowContext(ctx context.Context, srv workflowServer, workflow, runID, lease string, attempt int32,
	input json.RawMessage, logger *log.Logger) *WorkflowContext {
	if logger == nil {
		logger = log.Default()
	}
	return &WorkflowContext{ctx: ctx, srv: srv, workflow: workflow, runID: runID, lease: lease, attempt: attempt,
		input: input, journal: map[int]JournalEntry{}, now: time.Now().UTC(), logger: logger, sleep: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (wf *WorkflowContext) setJournal(steps []JournalEntry, now time.Time) {
	wf.journal = make(map[int]JournalEntry, len(steps))
	for _, e := range steps {
		wf.journal[e.Seq] = e
		if e.Seq+1 > wf.length {
			wf.length = e.Seq + 1
		}
	}
	if !now.IsZero() {
		wf.now = now
	}
}

// RunID is the run's id.
func (wf *WorkflowContext) RunID() string { return wf.runID }

// Workflow is the workflow's name.
func (wf *WorkflowContext) Workflow() string { return wf.workflow }

// Input is the run's input (as the function's second argument).
func (wf *WorkflowContext) Input() json.RawMessage { return wf.input }

// Attempt is the attempt of the run's task: 1 on the first execution, more after a crash.
func (wf *WorkflowContext) Attempt() int32 { return wf.attempt }

// Context ends when the execution should stop: the task's timeout, its lease lost, the run
// cancelled, the worker stopping. Step functions may watch it.
func (wf *WorkflowContext) Context() context.Context { return wf.ctx }

// Replaying reports whether the next durable call is answered from the journal (the code
// has been here before): for logging that should not repeat.
func (wf *WorkflowContext) Replaying() bool { return wf.seq < wf.length }

// stop ends the workflow goroutine.
func (wf *WorkflowContext) stop(reason exitReason, err error) {
	wf.exit, wf.exitErr = reason, err
	runtime.Goexit()
}

// at is the journal's entry at seq when there is one, which must be of kind and name (else
// the run fails with a non-determinism error). A durable call inside a step's function fails
// the run: a replay, which does not run the step, would not make it.
func (wf *WorkflowContext) at(kind, name string) (JournalEntry, bool) {
	if wf.inStep != "" {
		wf.stop(exitFail, fmt.Errorf("workflow %s run %s: %s %q called inside step %q: durable calls belong to the workflow function, not to a step's",
			wf.workflow, wf.runID, kind, name, wf.inStep))
	}
	e, ok := wf.journal[wf.seq]
	if !ok {
		return e, false
	}
	if e.Kind != kind || e.Name != name {
		wf.stop(exitFail, &NonDeterminismError{Workflow: wf.workflow, RunID: wf.runID, Seq: wf.seq,
			Recorded: fmt.Sprintf("%s %q", e.Kind, e.Name), Asked: fmt.Sprintf("%s %q", kind, name)})
	}
	return e, true
}

// callResult classifies a server call's error: nil (done), retry (an outage), or the end of
// this execution (a lease refusal: quietly; a non-determinism or other refusal: the run fails).
func (wf *WorkflowContext) classify(err error) (retry bool, reason exitReason, cause error) {
	var e *Error
	switch {
	case err == nil:
		return false, exitNone, nil
	case wf.ctx.Err() != nil:
		return false, exitStopped, err
	case asError(err, &e) && e.Status == 409 && e.Code == "nondeterministic":
		return false, exitFail, &NonDeterminismError{Workflow: wf.workflow, RunID: wf.runID, Seq: wf.seq, Message: e.Message}
	case asError(err, &e) && (e.Status == 404 || (e.Status == 409 && (e.Code == "lease_lost" || e.Code == "cancelled" || e.Code == "timed_out"))):
		return false, exitStopped, err // the task is not ours any more, or the run is gone
	case asError(err, &e) && e.Status < 500 && e.Status != 429:
		return false, exitFail, fmt.Errorf("docket refused the journal's call: %w", err)
	}
	return true, exitNone, err
}

// retrying runs f until it succeeds or its error ends the execution (ok false, with why);
// outages are retried with backoff while the execution's ctx lasts.
func (wf *WorkflowContext) retrying(f func(ctx context.Context) error) (ok bool, reason exitReason, cause error) {
	delay := 100 * time.Millisecond
	for {
		err := f(wf.ctx)
		retry, reason, cause := wf.classify(err)
		if err == nil {
			return true, exitNone, nil
		}
		if !retry {
			return false, reason, cause
		}
		wf.logger.Printf("docket workflow %s run %s: %v (retrying)", wf.workflow, wf.runID, err)
		if !wf.sleep(wf.ctx, delay) {
			return false, exitStopped, wf.ctx.Err()
		}
		if delay < 5*time.Second {
			delay *= 2
		}
	}
}

// must is retrying in the workflow goroutine: what ends the execution ends the goroutine.
func (wf *WorkflowContext) must(f func(ctx context.Context) error) {
	if ok, reason, cause := wf.retrying(f); !ok {
		wf.stop(reason, cause)
	}
}

// record sends the pending entries and e (synchronously).
func (wf *WorkflowContext) record(e entryOut) {
	steps := append(append([]entryOut(nil), wf.pending...), e)
	wf.must(func(ctx context.Context) error { return wf.srv.wfRecord(ctx, wf.runID, wf.lease, steps) })
	wf.pending = nil
}

// lazy records a small value with the next call that carries steps.
func (wf *WorkflowContext) lazy(kind, name string, v interface{}) {
	out, _ := json.Marshal(v)
	wf.pending = append(wf.pending, entryOut{Seq: wf.seq, Kind: kind, Name: name, Output: out})
	wf.seq++
}

// suspend waits for w: it returns the answer when the wait is already over, else ends the
// goroutine (the run sleeps or waits; the server handed its task back).
func (wf *WorkflowContext) suspend(w waitOut) *suspendAnswer {
	var ans *suspendAnswer
	steps := append([]entryOut(nil), wf.pending...)
	wf.must(func(ctx context.Context) error {
		var err error
		ans, err = wf.srv.wfSuspend(ctx, wf.runID, wf.lease, steps, w)
		return err
	})
	wf.pending = nil
	if ans.Outcome == "suspended" {
		wf.stop(exitSuspended, nil)
	}
	return ans
}

// Step runs fn once for the run: its result (JSON) is recorded and a replay returns it
// without running fn again. An error retries fn in this process with backoff (the task's
// lease is kept meanwhile) up to MaxAttempts times, or stops at once for a Permanent error
// (RetryIn(d, err) sets the next pause); then the failure is recorded and Step returns a
// *StepFailed (a replay returns the same). A step's output must be JSON-encodable; Step
// returns it encoded (StepAs decodes it).
func (wf *WorkflowContext) Step(name string, fn func() (interface{}, error), opts ...StepOptions) (json.RawMessage, error) {
	if e, ok := wf.at("step", name); ok {
		wf.seq++
		if e.State == "failed" {
			msg := ""
			if e.Error != nil {
				msg = *e.Error
			}
			return nil, &StepFailed{Name: name, Message: msg, Attempts: e.Attempts}
		}
		if len(e.Output) == 0 {
			return json.RawMessage("null"), nil
		}
		return e.Output, nil
	}
	o := StepOptions{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: 60 * time.Second}
	if len(opts) > 0 {
		if opts[0].MaxAttempts > 0 {
			o.MaxAttempts = opts[0].MaxAttempts
		}
		if opts[0].Backoff > 0 {
			o.Backoff = opts[0].Backoff
		}
		if opts[0].MaxBackoff > 0 {
			o.MaxBackoff = opts[0].MaxBackoff
		}
	}
	started := time.Now().UTC()
	delay := o.Backoff
	var out json.RawMessage
	var last error
	attempts := 0
	for {
		attempts++
		wf.inStep = name
		v, err := runStep(fn)
		wf.inStep = ""
		if err == nil {
			b, merr := json.Marshal(v)
			if merr == nil {
				out, last = b, nil
				break
			}
			err = Permanent(fmt.Errorf("the step's output is not JSON: %w", merr))
		}
		last = err
		var pe *permanentError
		if errors.As(err, &pe) || attempts >= o.MaxAttempts {
			break
		}
		pause := delay
		var re *retryError
		if errors.As(err, &re) {
			pause = re.after
		}
		if !wf.sleep(wf.ctx, pause) {
			wf.stop(exitStopped, wf.ctx.Err())
		}
		if delay *= 2; delay > o.MaxBackoff {
			delay = o.MaxBackoff
		}
	}
	e := entryOut{Seq: wf.seq, Kind: "step", Name: name, Attempts: attempts, StartedAt: &started}
	if last == nil {
		e.Output = out
	} else {
		msg := last.Error()
		e.Error = &msg
	}
	wf.record(e)
	wf.seq++
	if last != nil {
		return nil, &StepFailed{Name: name, Message: last.Error(), Attempts: attempts, Err: last}
	}
	return out, nil
}

func runStep(fn func() (interface{}, error)) (v interface{}, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn()
}

// StepAs is Step with a typed result: fn's value is recorded as JSON and decoded into T (on
// the first execution too, so a replay returns the same).
func StepAs[T any](wf *WorkflowContext, name string, fn func() (T, error), opts ...StepOptions) (T, error) {
	var v T
	raw, err := wf.Step(name, func() (interface{}, error) { return fn() }, opts...)
	if err != nil {
		return v, err
	}
	err = json.Unmarshal(raw, &v)
	return v, err
}

// Now is the time, recorded: a replay returns the same.
func (wf *WorkflowContext) Now() time.Time {
	if e, ok := wf.at("now", "now"); ok {
		wf.seq++
		var s string
		_ = json.Unmarshal(e.Output, &s)
		t, _ := time.Parse(time.RFC3339Nano, s)
		return t
	}
	t := time.Now().UTC().Round(0)
	wf.lazy("now", "now", t.Format(time.RFC3339Nano))
	return t
}

// Random is a random float64 in [0, 1), recorded: a replay returns the same.
func (wf *WorkflowContext) Random() float64 {
	if e, ok := wf.at("random", "random"); ok {
		wf.seq++
		var f float64
		_ = json.Unmarshal(e.Output, &f)
		return f
	}
	f := rand.Float64()
	wf.lazy("random", "random", f)
	return f
}

// UUID is a random (version 4) UUID, recorded: a replay returns the same.
func (wf *WorkflowContext) UUID() string {
	if e, ok := wf.at("uuid", "uuid"); ok {
		wf.seq++
		var s string
		_ = json.Unmarshal(e.Output, &s)
		return s
	}
	u := newClaimID()
	wf.lazy("uuid", "uuid", u)
	return u
}

// Patched marks a change to the code: true where the run takes the new code, false for a run
// that was past this point before the change (its journal has another entry here: it replays
// the old code). The rule (Temporal's): an entry at this point that is this patch's marker →
// true; another entry → false; no entry (new execution) → the marker is recorded, true.
//
//	if wf.Patched("send-sms") { wf.Step("sms", …) } else { wf.Step("email", …) }
func (wf *WorkflowContext) Patched(id string) bool {
	if wf.inStep != "" {
		wf.at("patch", id) // refused
	}
	if e, ok := wf.journal[wf.seq]; ok {
		if e.Kind == "patch" && e.Name == id {
			wf.seq++
			return true
		}
		return false
	}
	wf.lazy("patch", id, nil)
	return true
}

// Sleep sleeps d, durably: the run's task is handed back and the run wakes after d on
// whichever worker claims it (a restart of the server or the worker in between changes
// nothing).
func (wf *WorkflowContext) Sleep(d time.Duration) {
	until := time.Now().UTC().Add(d)
	if e, ok := wf.at("sleep", "sleep"); ok {
		if e.State == "completed" || (e.WakeAt != nil && !e.WakeAt.After(wf.now)) {
			wf.seq++
			return
		}
		if e.WakeAt != nil {
			until = *e.WakeAt
		}
	}
	ans := wf.suspend(waitOut{Seq: wf.seq, Kind: "sleep", Name: "sleep", Until: &until})
	if ans.Outcome != "due" && ans.Outcome != "event" {
		wf.stop(exitFail, fmt.Errorf("docket answered a sleep with outcome %q", ans.Outcome))
	}
	wf.seq++
}

// WaitForEvent waits for the event name sent to the run (Client.SendEvent; one sent earlier
// waits in the run's mailbox), at most timeout (0: forever): its payload and true, or nil and
// false once the timeout passed.
func (wf *WorkflowContext) WaitForEvent(name string, timeout time.Duration) (json.RawMessage, bool) {
	if e, ok := wf.at("event", name); ok {
		switch e.State {
		case "completed":
			wf.seq++
			return e.Output, true
		case "timed_out":
			wf.seq++
			return nil, false
		}
	}
	w := waitOut{Seq: wf.seq, Kind: "event", Name: name}
	if timeout > 0 {
		w.Timeout = Duration(timeout)
	}
	ans := wf.suspend(w)
	wf.seq++
	switch ans.Outcome {
	case "event":
		return ans.Payload, true
	case "timed_out":
		return nil, false
	}
	wf.stop(exitFail, fmt.Errorf("docket answered a wait for event %q with outcome %q", name, ans.Outcome))
	return nil, false
}

// ChildRun is a child run StartChild started.
type ChildRun struct {
	ID, Workflow string
	wf           *WorkflowContext
}

// StartChild starts a run of workflow with input as a child of this run (recorded: a replay
// does not start it again). Its Result waits for it; a child not awaited runs on its own
// (cancelling the parent cancels it).
func (wf *WorkflowContext) StartChild(workflow string, input interface{}, opts ...ChildOptions) *ChildRun {
	var o ChildOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	id := o.ID
	if id == "" {
		id = fmt.Sprintf("%s:%d", wf.runID, wf.seq)
	}
	if e, ok := wf.at("child", workflow); ok {
		wf.seq++
		if e.ChildID != nil {
			id = *e.ChildID
		}
		return &ChildRun{ID: id, Workflow: workflow, wf: wf}
	}
	in, err := json.Marshal(input)
	if err != nil {
		wf.stop(exitFail, fmt.Errorf("child workflow %s: the input is not JSON: %w", workflow, err))
	}
	if o.Queue == "" {
		o.Queue = wf.queue
	}
	wf.record(entryOut{Seq: wf.seq, Kind: "child", Name: workflow, Child: &childOut{ID: id, Input: in, Queue: o.Queue}})
	wf.seq++
	return &ChildRun{ID: id, Workflow: workflow, wf: wf}
}

// Result waits for the child run to end: its result, or a *ChildFailed when it failed or was
// cancelled. Call it from the workflow's goroutine, as the context's methods.
func (c *ChildRun) Result() (json.RawMessage, error) {
	wf := c.wf
	var payload json.RawMessage
	if e, ok := wf.at("child_wait", c.Workflow); ok && (e.State == "completed" || e.State == "failed") && len(e.Output) > 0 {
		payload = e.Output
		wf.seq++
	} else {
		ans := wf.suspend(waitOut{Seq: wf.seq, Kind: "child_wait", Name: c.Workflow, ChildID: c.ID})
		if ans.Outcome != "event" {
			wf.stop(exitFail, fmt.Errorf("docket answered a wait for child %s with outcome %q", c.ID, ans.Outcome))
		}
		payload = ans.Payload
		wf.seq++
	}
	var end struct {
		State  string          `json:"state"`
		Result json.RawMessage `json:"result"`
		Error  *string         `json:"error"`
	}
	_ = json.Unmarshal(payload, &end)
	if end.State == "completed" {
		if len(end.Result) == 0 {
			return json.RawMessage("null"), nil
		}
		return end.Result, nil
	}
	msg := ""
	if end.Error != nil {
		msg = *end.Error
	}
	return nil, &ChildFailed{ID: c.ID, Workflow: c.Workflow, State: end.State, Message: msg}
}

// --- the driver -----------------------------------------------------------------------------

// errWorkflowHandled: the execution reported itself (finish, suspend) or stopped quietly; the
// worker reports nothing for its task.
var errWorkflowHandled = errors.New("docket: workflow execution handled")

type wfOutcome struct {
	value    interface{}
	err      error
	returned bool
	panicked interface{}
	stack    []byte
}

// execute runs fn in a goroutine of its own and waits for it to return or end (Goexit).
func (wf *WorkflowContext) execute(fn WorkflowFunc, input json.RawMessage) wfOutcome {
	done := make(chan wfOutcome, 1)
	go func() {
		var out wfOutcome
		defer func() {
			if p := recover(); p != nil {
				out = wfOutcome{panicked: p, stack: debug.Stack()}
			}
			done <- out
		}()
		v, err := fn(wf, input)
		out = wfOutcome{value: v, err: err, returned: true}
	}()
	return <-done
}

// drive runs one execution of a run through to its end: a finish, a suspension, or a quiet
// stop. fresh: a first execution (the journal is empty); else the journal is read first.
func (wf *WorkflowContext) drive(fn WorkflowFunc, fresh bool) {
	if !fresh {
		var ans *resumeAnswer
		ok, reason, cause := wf.retrying(func(ctx context.Context) error {
			var err error
			ans, err = wf.srv.wfResume(ctx, wf.runID, wf.lease)
			return err
		})
		if !ok {
			if reason == exitFail {
				wf.logger.Printf("docket workflow %s run %s: resume: %v", wf.workflow, wf.runID, cause)
			}
			return
		}
		if terminalRunState(ans.Run.State) {
			// Over already (the task outlived the run's end): finish again, which completes it.
			wf.finish(ans.Run.Result, ans.Run.Error)
			return
		}
		wf.setJournal(ans.Steps, ans.Now)
		if len(wf.input) == 0 {
			wf.input = ans.Run.Input
		}
	}
	out := wf.execute(fn, wf.input)
	switch {
	case out.panicked != nil:
		wf.logger.Printf("docket workflow %s run %s: panic: %v\n%s", wf.workflow, wf.runID, out.panicked, out.stack)
		msg := fmt.Sprintf("panic: %v", out.panicked)
		wf.finish(nil, &msg)
	case out.returned && out.err != nil:
		msg := out.err.Error()
		wf.finish(nil, &msg)
	case out.returned && wf.leftover() != "":
		// The code changed under the run: it returned before asking for what the journal holds.
		msg := wf.leftover()
		wf.finish(nil, &msg)
	case out.returned:
		b, err := json.Marshal(out.value)
		if err != nil {
			msg := fmt.Sprintf("the workflow's result is not JSON: %v", err)
			wf.finish(nil, &msg)
			return
		}
		wf.finish(b, nil)
	case wf.exit == exitFail:
		wf.logger.Printf("docket workflow %s run %s: %v", wf.workflow, wf.runID, wf.exitErr)
		msg := wf.exitErr.Error()
		wf.finish(nil, &msg)
	default: // suspended, or the task is not ours any more: nothing more to say
	}
}

// leftover is, at the function's return, the non-determinism error for the journal's entries it
// did not ask for (as the Python and Rust workers say it); "" when there are none.
func (wf *WorkflowContext) leftover() string {
	if wf.seq >= wf.length {
		return ""
	}
	e := wf.journal[wf.seq]
	return fmt.Sprintf("non-determinism: workflow %s run %s: the code returned after %d call(s) but the journal has %d; entry %d is %s %q",
		wf.workflow, wf.runID, wf.seq, wf.length, wf.seq, e.Kind, e.Name)
}

// finish ends the run with result or errMsg (the pending entries with it); the server
// completes (or fails) the task.
func (wf *WorkflowContext) finish(result json.RawMessage, errMsg *string) {
	steps := append([]entryOut(nil), wf.pending...)
	ok, reason, cause := wf.retrying(func(ctx context.Context) error {
		return wf.srv.wfFinish(ctx, wf.runID, wf.lease, steps, result, errMsg)
	})
	wf.pending = nil
	if !ok && reason == exitFail {
		wf.logger.Printf("docket workflow %s run %s: finish refused: %v", wf.workflow, wf.runID, cause)
	}
}

// workflowHandler is the task handler that drives runs of fn (a task of the workflow queue of
// kind name).
func (w *Worker) workflowHandler(name string, fn WorkflowFunc) Handler {
	return func(ctx context.Context, job *Job) (interface{}, error) {
		var p struct {
			Run   string          `json:"workflow_run"`
			Input json.RawMessage `json:"input"`
		}
		if err := job.Payload(&p); err != nil || p.Run == "" {
			return nil, Permanent(fmt.Errorf("not a workflow run's task (no workflow_run in its payload)"))
		}
		if job.Task.Lease == nil {
			return nil, Permanent(fmt.Errorf("workflow task without a lease"))
		}
		wf := newWorkflowContext(ctx, w.o.Client, name, p.Run, job.Task.Lease.Token, job.Attempt(), p.Input, w.o.Logger)
		wf.queue = job.Task.Queue
		wf.drive(fn, job.Attempt() == 1 && job.Stage() == "")
		return nil, errWorkflowHandled
	}
}

// defaultWorkflowLease is the lease of a workflow queue's claims when WorkerOptions.Lease is
// not set.
const defaultWorkflowLease = 30 * time.Second

// Workflow registers fn as the workflow name: the worker claims the runs' tasks from
// WorkerOptions.WorkflowQueue ["workflows"] (kinds: the registered workflows' names; lease:
// WorkerOptions.Lease, else 30 s, kept by heartbeats) and runs each execution in a goroutine
// of its own, WorkflowConcurrency at once.
func (w *Worker) Workflow(name string, fn WorkflowFunc) {
	if w.wf == nil {
		o := w.given
		o.Client, o.Name, o.Logger = w.o.Client, w.o.Name, w.o.Logger
		o.Queue = o.WorkflowQueue
		if o.Queue == "" {
			o.Queue = "workflows"
		}
		if o.WorkflowConcurrency > 0 {
			o.Concurrency = o.WorkflowConcurrency
		}
		if o.Lease <= 0 {
			// A run's task has a long timeout (1 h unless started with one): a short lease kept
			// by heartbeats lets another worker take over a dead one's runs within it.
			o.Lease = defaultWorkflowLease
		}
		w.wf, _ = NewWorker(o)
	}
	w.wf.handlers[name+"\x00"] = w.workflowHandler(name, fn)
}
