package docket

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"time"
)

// HeartbeatsPerLease is how many heartbeats a worker sends per lease: one every third of it,
// never more often than MinHeartbeatEvery. docket's rule (docket_core::lease::heartbeat_every;
// the engine's worker and `docket worker` use it): one late or lost heartbeat still leaves a
// third of the lease.
const HeartbeatsPerLease = 3

// MinHeartbeatEvery is the shortest interval between heartbeats (docket's MIN_HEARTBEAT_EVERY).
const MinHeartbeatEvery = 100 * time.Millisecond

// HeartbeatEvery is the interval between heartbeats for a lease of lease (docket's rule).
func HeartbeatEvery(lease time.Duration) time.Duration {
	if every := lease / HeartbeatsPerLease; every > MinHeartbeatEvery {
		return every
	}
	return MinHeartbeatEvery
}

// PrefetchAutoWait: under automatic prefetch (WorkerOptions.Prefetch 0, the default) a worker
// holds ahead what its handlers start within this time at their recent pace.
const PrefetchAutoWait = 100 * time.Millisecond

// PrefetchAutoMax is the most tasks automatic prefetch holds ahead.
const PrefetchAutoMax = 1000

// NoPrefetch, as WorkerOptions.Prefetch, holds no task ahead of free handlers: a worker claims
// only for the handlers it has free.
const NoPrefetch = -1

// AutoPrefetch is how many tasks automatic prefetch holds ahead (the same rule in every docket
// client): as many as concurrency handlers taking avg each start within PrefetchAutoWait —
// floor(concurrency × 100 ms / avg), avg at least 1 µs, at most PrefetchAutoMax; none before
// a handler has finished (known false). A held task's lease and timeout run while it waits, so
// long tasks are never held (handlers of ≥ 100 ms × concurrency hold none) and short ones are
// fetched in claims of up to a thousand.
func AutoPrefetch(concurrency int, avg time.Duration, known bool) int {
	if !known || concurrency <= 0 {
		return 0
	}
	if avg < time.Microsecond {
		avg = time.Microsecond
	}
	if n := int64(concurrency) * int64(PrefetchAutoWait) / int64(avg); n < PrefetchAutoMax {
		return int(n)
	}
	return PrefetchAutoMax
}

// Handler runs one task. Its ctx ends at the task's timeout, when docket cancels the task or
// the lease is lost, or when the worker hands the task back on stop. Return the result (any
// JSON-encodable value, or *NextStage), or an error: RetryIn and Permanent choose how the
// attempt fails; any other error fails it with its message and the task follows its backoff.
type Handler func(ctx context.Context, job *Job) (interface{}, error)

// Job is what a Handler gets.
type Job struct {
	// Task is the claimed task. Unless WorkerOptions.FullTasks, the worker claims lean tasks
	// and Task has only the fields a lean claim answers (see LeanTask.AsTask), the others zero.
	Task   *Task
	worker *Worker
	run    *running
}

// ID, Kind, Attempt and Stage of the task.
func (j *Job) ID() int64 { return j.Task.ID }

// Kind of the task.
func (j *Job) Kind() string { return j.Task.Kind }

// Attempt number (1 for the first).
func (j *Job) Attempt() int32 { return j.Task.Attempt }

// Stage of the task ("" when it has none).
func (j *Job) Stage() string {
	if j.Task.Stage == nil {
		return ""
	}
	return *j.Task.Stage
}

// Payload decodes the task's payload into v.
func (j *Job) Payload(v interface{}) error { return json.Unmarshal(j.Task.Payload, v) }

// Progress records progress (any JSON), sent with the next heartbeat.
func (j *Job) Progress(v interface{}) {
	j.run.mu.Lock()
	j.run.progress = v
	j.run.mu.Unlock()
}

// Heartbeat sends a heartbeat now (with the progress recorded so far).
func (j *Job) Heartbeat(ctx context.Context) { j.worker.beat(ctx, j.run) }

// NextStage, returned as a handler's result, hands the task on to Stage (asyncflow's
// multi-stage tasks): same task, new Payload (kept when nil), optionally Priority and RunIn.
type NextStage struct {
	Stage    string
	Payload  interface{}
	Priority *int32
	RunIn    time.Duration
	Result   interface{}
}

type retryError struct {
	after time.Duration
	err   error
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// RetryIn fails the attempt with err and retries after d instead of the task's backoff.
func RetryIn(d time.Duration, err error) error { return &retryError{after: d, err: err} }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent fails the task for good (discarded, no more attempts).
func Permanent(err error) error { return &permanentError{err: err} }

// WorkerOptions configure a Worker; zero values take the defaults in brackets.
type WorkerOptions struct {
	Client      *Client // [NewClient(Options{})]
	Queue       string  // ["default"]
	Concurrency int     // handlers at once [10]
	Name        string  // worker name recorded on tasks [host-pid]
	// Batch: most tasks per claim [Concurrency + Prefetch, at most 1000; with automatic
	// prefetch Concurrency + PrefetchAutoMax, so 1000].
	Batch int
	// Prefetch: tasks claimed ahead of free handlers and held locally (their leases run,
	// heartbeats keep them, the handler's timeout counts from the claim; on stop the ones not
	// started are handed back). Like graphile-worker's local queue: fewer, larger claims for
	// short tasks.
	//   - 0 (the default): automatic — what the handlers start within PrefetchAutoWait
	//     (100 ms) at their recent pace (AutoPrefetch of a moving average of their run time:
	//     none for long tasks, none before a handler has finished, up to PrefetchAutoMax for
	//     short ones); Worker.Prefetching tells the current number;
	//   - more than 0: that many;
	//   - NoPrefetch (any negative number): none, claims only for free handlers. (Before
	//     automatic prefetch, 0 meant none: say NoPrefetch for that now.)
	Prefetch int
	// Claims: claims in flight at once while the queue has work [2; from 1 to 16]. The first
	// claim loop long-polls when the queue is empty; the others claim only while the last
	// claim found tasks and never wait, so an idle worker holds one request. Each asks for at
	// most its share of the free room ((Concurrency + prefetch) / Claims), so together they
	// never take more than the worker holds. More than one hides the claim's round trip behind
	// the handlers. 1: one claim at a time.
	Claims int
	// FullTasks claims tasks with every field of Task [false: lean tasks — id, kind, payload,
	// attempt, max_attempts, stage, timeout, attempted_at, lease, and trace_id, process,
	// batch_id, deps where present. Job.Task is then a Task made of those (LeanTask.AsTask:
	// with Queue, State "running" and LeaseExpiresAt; the other fields zero, CreatedAt, RunAt,
	// Errors… among them): Client.GetTask(ctx, job.ID()) reads the rest].
	FullTasks      bool
	Wait           time.Duration // long-poll per claim [10s]
	Lease          time.Duration // lease per claim [the task's timeout]
	ShutdownGrace  time.Duration // time tasks in hand get on stop [30s]
	ReportInterval time.Duration // reports to /v1/workers [10s; negative: none]
	Logger         *log.Logger   // [log.Default()]
	// WorkflowQueue is the queue of the workflows registered with Workflow ["workflows"];
	// the worker claims it with its own claims (the same options, WorkflowConcurrency runs at
	// once).
	WorkflowQueue string
	// WorkflowConcurrency: workflow executions at once [Concurrency].
	WorkflowConcurrency int
	// Labels are the worker's, carried by every claim (see ClaimRequest.Labels) and by its
	// reports (WorkerReport.Labels) [none: only tasks that require nothing and prefer nothing,
	// or whose preference ran out].
	Labels map[string]string
}

// maxReportBatch is the most reports per batched complete/fail; a claim carries up to
// max(maxReportBatch, Batch) (fewer let a backlog grow with claims of 1000).
const maxReportBatch = 500

// Worker claims and runs tasks of one queue. Register handlers, then Run.
//
// Up to Claims claims are in flight while the queue has work. What finished goes with the
// next claim (one round trip for both) while the queue has work: such a claim does not wait and
// is not given up at a stop. When no claim in flight carries reports (a long poll, no handler
// free, the stop) the reporter sends them on their own.
type Worker struct {
	o        WorkerOptions
	given    WorkerOptions // as NewWorker got them (the workflow worker starts from them)
	wf       *Worker       // claims and runs the workflow queue (Workflow), nil without workflows
	handlers map[string]Handler
	mu       sync.Mutex
	running  map[int64]*running // held: waiting in buffer or executing
	buffer   []*running
	exec     int
	wg       sync.WaitGroup
	// The claim loops' accounting (under mu). asked: tasks asked by the claims in flight,
	// counted as held so the loops never take too many. carriers: claims in flight that carry
	// reports (they do not wait: what finishes meanwhile goes with the next one). busy: the last
	// claim answered found tasks, the loops ask again at once. wake is closed (and replaced)
	// to wake the loops waiting for room; wakeUsed: a loop waits on it.
	asked    int
	carriers int
	busy     bool
	wake     chan struct{}
	wakeUsed bool
	// avgRun: moving average of the handlers' run time (for automatic prefetch), once ranOnce.
	avgRun  time.Duration
	ranOnce bool
	// reports waits to be sent (under mu): by the reporter when carriers is 0, else by the next
	// claim. drained: the claim loops and the drain are over, the reporter may end.
	reports     []report
	drained     bool
	reportReady chan struct{}
	started     time.Time
	// Completed, Failed and Lost count delivered reports (Lost: answered other than ok).
	Completed, Failed, Lost int64
}

type running struct {
	job       *Job
	ctx       context.Context // ends at the attempt's timeout, counted from the claim
	timeout   time.Duration
	cancel    context.CancelFunc
	mu        sync.Mutex
	progress  interface{}
	leaseEnd  time.Time
	leaseLen  time.Duration // what a heartbeat extends the lease by
	beatEvery time.Duration
	nextBeat  time.Time
	lost      bool // docket took it back: report nothing
	handedOff bool // stop handed it back: reported already
	reported  bool // its handler ended and its outcome is reported: not handed back
}

type report struct {
	complete *CompleteRequest
	fail     *FailRequest
	leaseEnd time.Time
}

// NewWorker makes a worker; it fails only when the default client cannot be made.
func NewWorker(o WorkerOptions) (*Worker, error) {
	given := o
	if o.Client == nil {
		c, err := NewClient(Options{})
		if err != nil {
			return nil, err
		}
		o.Client = c
	}
	if o.Queue == "" {
		o.Queue = "default"
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 10
	}
	ahead := o.Prefetch // the most held ahead
	switch {
	case o.Prefetch == 0:
		ahead = PrefetchAutoMax
	case o.Prefetch < 0:
		o.Prefetch, ahead = NoPrefetch, 0
	}
	if o.Batch <= 0 || o.Batch > 10000 {
		o.Batch = minInt(o.Concurrency+ahead, 1000)
	}
	switch {
	case o.Claims == 0:
		o.Claims = 2
	case o.Claims < 1:
		o.Claims = 1
	case o.Claims > 16:
		o.Claims = 16
	}
	if o.Wait == 0 {
		o.Wait = 10 * time.Second
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = 30 * time.Second
	}
	if o.ReportInterval == 0 {
		o.ReportInterval = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = log.Default()
	}
	if o.Name == "" {
		host, _ := os.Hostname()
		o.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return &Worker{o: o, given: given, handlers: map[string]Handler{}, running: map[int64]*running{},
		wake: make(chan struct{}), reportReady: make(chan struct{}, 1)}, nil
}

// Prefetching is how many tasks the worker holds ahead of free handlers now: Prefetch, or
// under automatic prefetch AutoPrefetch's number for the handlers' recent pace.
func (w *Worker) Prefetching() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.prefetching()
}

// prefetching is Prefetching, under mu.
func (w *Worker) prefetching() int {
	switch {
	case w.o.Prefetch == 0:
		return AutoPrefetch(w.o.Concurrency, w.avgRun, w.ranOnce)
	case w.o.Prefetch < 0:
		return 0
	}
	return w.o.Prefetch
}

// ran folds a handler's run time into the moving average automatic prefetch follows (under mu).
func (w *Worker) ran(d time.Duration) {
	if !w.ranOnce {
		w.avgRun, w.ranOnce = d, true
		return
	}
	w.avgRun += (d - w.avgRun) / 10
}

// wakeLanes wakes every claim loop waiting for room: a handler ended, a claim found tasks
// (under mu).
func (w *Worker) wakeLanes() {
	if w.wakeUsed {
		close(w.wake)
		w.wake, w.wakeUsed = make(chan struct{}), false
	}
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Name is the worker's name.
func (w *Worker) Name() string { return w.o.Name }

// Register makes fn the handler of kind (every stage of it).
func (w *Worker) Register(kind string, fn Handler) { w.handlers[kind+"\x00"] = fn }

// RegisterStage makes fn the handler of kind at stage.
func (w *Worker) RegisterStage(kind, stage string, fn Handler) { w.handlers[kind+"\x00"+stage] = fn }

func (w *Worker) kinds() (kinds, stages []string) {
	ks, ss, any := map[string]bool{}, map[string]bool{}, false
	for k := range w.handlers {
		var kind, stage string
		for i := 0; i < len(k); i++ {
			if k[i] == 0 {
				kind, stage = k[:i], k[i+1:]
				break
			}
		}
		ks[kind] = true
		if stage == "" {
			any = true
		} else {
			ss[stage] = true
		}
	}
	for k := range ks {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	if !any {
		for s := range ss {
			stages = append(stages, s)
		}
		sort.Strings(stages)
	}
	return
}

func (w *Worker) handlerFor(t *Task) Handler {
	stage := ""
	if t.Stage != nil {
		stage = *t.Stage
	}
	if h, ok := w.handlers[t.Kind+"\x00"+stage]; ok {
		return h
	}
	return w.handlers[t.Kind+"\x00"]
}

// Run claims and runs tasks until ctx ends (e.g. signal.NotifyContext for SIGTERM), then
// stops gracefully: no new claims (a claim still waiting is given up and released by its
// claim_id: what it took is available again at once, no attempt counted), held tasks not
// started are released the same way, the running ones get ShutdownGrace to finish, the rest
// are handed back (failed with retry_in 0, so they run again at once), every report is sent.
//
// With workflows registered (Workflow), the workflow queue is claimed and worked alongside, and
// stopped the same way; the presence reports (ReportInterval) are the task queue's, or the
// workflow queue's when no handler is registered.
func (w *Worker) Run(ctx context.Context) error {
	if w.wf != nil {
		if len(w.handlers) == 0 {
			return w.wf.Run(ctx)
		}
		w.wf.o.ReportInterval = -1
		done := make(chan error, 1)
		go func() { done <- w.wf.Run(ctx) }()
		defer func() { <-done }()
	}
	if len(w.handlers) == 0 {
		return errors.New("docket: no handler registered")
	}
	w.started = time.Now().UTC()
	bg, stopBg := context.WithCancel(context.Background())
	defer stopBg()
	var reporterDone = make(chan struct{})
	go func() { w.reporter(bg); close(reporterDone) }()
	go w.heartbeats(bg)
	if w.o.ReportInterval > 0 {
		go w.presence(ctx)
	}
	w.claimLoop(ctx)
	w.drain()
	w.wg.Wait()
	w.mu.Lock()
	w.drained = true
	w.mu.Unlock()
	w.wakeReporter()
	<-reporterDone
	w.sendPresence(context.Background(), "stop")
	return nil
}

func (w *Worker) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

// claimLoop runs Claims claim loops (lanes) until ctx ends and they are over.
func (w *Worker) claimLoop(ctx context.Context) {
	kinds, stages := w.kinds()
	var lanes sync.WaitGroup
	for i := 0; i < w.o.Claims; i++ {
		lanes.Add(1)
		go func(first bool) {
			defer lanes.Done()
			w.claimLane(ctx, first, kinds, stages)
		}(i == 0)
	}
	lanes.Wait()
	w.wakeReporter() // at the stop the reporter sends what is left
}

// claimLane is one claim loop. The first (first) long-polls while the queue is empty; the
// others claim only while it has work (the last claim answered found tasks) and never wait.
func (w *Worker) claimLane(ctx context.Context, first bool, kinds, stages []string) {
	for ctx.Err() == nil {
		w.mu.Lock()
		room := w.o.Concurrency + w.prefetching()
		share := maxInt(1, (room+w.o.Claims-1)/w.o.Claims)
		free := room - len(w.running) - w.asked
		// The first loop alone asks for all the room when the queue was idle; with the queue
		// busy every loop asks for its share, so a claim is answered while the others' tasks run.
		limit := minInt(free, w.o.Batch)
		least := 1
		if !first {
			limit = minInt(limit, share)
			// The others wait until half a share is free: claims of a task or two cost a round
			// trip each.
			least = (minInt(share, w.o.Batch) + 1) / 2
		}
		if limit < least || (!first && !w.busy) {
			wake := w.wake
			w.wakeUsed = true
			idle := w.carriers == 0
			w.mu.Unlock()
			if idle {
				w.wakeReporter() // no claim goes out carrying them: the reporter sends the reports
			}
			select {
			case <-wake:
			case <-ctx.Done():
			}
			continue
		}
		// One round trip reports what finished and asks for more. Such a claim does not wait
		// and is not given up at a stop, so its reports are never in doubt.
		n := minInt(len(w.reports), maxInt(maxReportBatch, w.o.Batch))
		carried := append([]report(nil), w.reports[:n]...)
		w.reports = w.reports[n:]
		waits := first && !w.busy && len(carried) == 0
		if !waits {
			w.carriers++
		}
		w.asked += limit
		w.mu.Unlock()
		r := ClaimRequest{Worker: w.o.Name, Limit: limit, Wait: "0s", Kinds: kinds, Stages: stages,
			Labels: w.o.Labels, ClaimID: newClaimID(), Lean: !w.o.FullTasks}
		if w.o.Lease > 0 {
			r.Lease = Duration(w.o.Lease)
		}
		for _, rep := range carried {
			if rep.complete != nil {
				r.Complete = append(r.Complete, *rep.complete)
			} else {
				r.Fail = append(r.Fail, *rep.fail)
			}
		}
		cctx := context.Background()
		if waits {
			w.wakeReporter() // a long poll carries nothing: the reporter sends the reports
			r.Wait = Duration(w.o.Wait)
			cctx = ctx
		}
		got, err := w.o.Client.ClaimWith(cctx, w.o.Queue, r)
		var runs []*running
		if err == nil {
			tasks := got.Tasks
			if got.Lean != nil {
				tasks = make([]Task, len(got.Lean))
				for i := range got.Lean {
					tasks[i] = got.Lean[i].AsTask(w.o.Queue)
				}
			}
			runs = make([]*running, len(tasks))
			for i := range tasks {
				runs[i] = w.newRun(&tasks[i])
			}
		}
		// What it asked for leaves asked as its tasks become held, at once: the other loops
		// never see room that is not there.
		w.mu.Lock()
		w.asked -= limit
		if !waits {
			w.carriers--
		}
		idle := w.carriers == 0
		if err != nil {
			w.busy = false
			// Not carried after all: the next claim or the reporter sends them (first).
			w.reports = append(carried, w.reports...)
		} else {
			w.busy = len(runs) > 0
			for _, run := range runs {
				w.running[run.job.ID()] = run
				w.buffer = append(w.buffer, run)
			}
		}
		// The other loops may claim now (busy), or look again at the room this claim asked for:
		// without it, a first loop waiting while another's claim held all the room would not
		// see that claim come back empty, and would wait for a handler that never ends.
		w.wakeLanes()
		w.mu.Unlock()
		if idle {
			w.wakeReporter()
		}
		if err != nil {
			if ctx.Err() != nil {
				// Stopped mid-claim: the server may have claimed tasks for an answer nobody
				// will read. Released by the claim's id they are available again at once
				// (docket finds them even when the release overtakes the claim).
				w.releaseClaim(r.ClaimID)
				return
			}
			pause := time.Second
			var e *Error
			if asError(err, &e) && e.Code == "rate_limited" && e.RetryAfter > 0 {
				pause = e.RetryAfter
			} else {
				w.o.Logger.Printf("docket worker %s: claim failed: %v", w.o.Name, err)
			}
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
			continue
		}
		w.settle(true, got.Completed)
		w.settle(false, got.Failed)
		w.pump()
	}
}

func (w *Worker) wakeReporter() {
	select {
	case w.reportReady <- struct{}{}:
	default:
	}
}

// push queues a report for the reporter or the next claim.
func (w *Worker) push(r report) {
	w.mu.Lock()
	w.reports = append(w.reports, r)
	w.mu.Unlock()
	w.wakeReporter()
}

// settle counts reports answered (outcomes, one per item: completions or failures) and warns
// of those not ok.
func (w *Worker) settle(completions bool, outcomes []ItemOutcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if completions {
		w.Completed += int64(len(outcomes))
	} else {
		w.Failed += int64(len(outcomes))
	}
	for _, o := range outcomes {
		if o.Outcome != "ok" {
			w.Lost++
			w.o.Logger.Printf("docket worker %s: task %d: report answered %s", w.o.Name, o.ID, o.Outcome)
		}
	}
}

// newRun makes what holds task t: its ctx ends at the attempt's timeout, counted from now
// (the claim).
func (w *Worker) newRun(t *Task) *running {
	timeout, err := ParseDuration(t.Timeout)
	if err != nil || timeout <= 0 {
		timeout = 60 * time.Second
	}
	leaseLen := timeout
	if t.Lease != nil && t.AttemptedAt != nil {
		if d := t.Lease.ExpiresAt.Sub(*t.AttemptedAt); d > 0 {
			leaseLen = d
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	now := time.Now()
	run := &running{ctx: ctx, timeout: timeout, cancel: cancel, leaseEnd: now.Add(leaseLen), leaseLen: leaseLen, beatEvery: HeartbeatEvery(leaseLen), nextBeat: now.Add(HeartbeatEvery(leaseLen))}
	run.job = &Job{Task: t, worker: w, run: run}
	return run
}

// pump starts held tasks while handlers are free (each with its own ctx and timeout).
func (w *Worker) pump() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.exec < w.o.Concurrency && len(w.buffer) > 0 {
		run := w.buffer[0]
		w.buffer = w.buffer[1:]
		run.mu.Lock()
		lost := run.lost
		run.mu.Unlock()
		if lost { // docket took it back while it waited here
			delete(w.running, run.job.ID())
			w.wakeLanes()
			continue
		}
		w.exec++
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.execute(run.ctx, run, run.timeout)
		}()
	}
}

type outcome struct {
	value interface{}
	err   error
}

func (w *Worker) execute(ctx context.Context, run *running, timeout time.Duration) {
	job := run.job
	defer run.cancel()
	done := make(chan outcome, 1)
	h := w.handlerFor(job.Task)
	began := time.Now()
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: fmt.Errorf("panic: %v\n%s", p, debug.Stack())}
			}
		}()
		if h == nil {
			done <- outcome{err: Permanent(fmt.Errorf("no handler for kind %q stage %q", job.Kind(), job.Stage()))}
			return
		}
		v, err := h(ctx, job)
		done <- outcome{v, err}
	}()
	var out outcome
	select {
	case out = <-done:
	case <-ctx.Done():
		// The handler may still run (it should watch ctx); the attempt ends now.
		out = outcome{err: ctx.Err()}
	}
	took := time.Since(began)
	// skip: docket took the task back or the stop handed it back: nothing to report. handled:
	// a workflow execution reported itself to docket (finish, suspend), or stopped quietly.
	handled := errors.Is(out.err, errWorkflowHandled)
	run.mu.Lock()
	gone := run.lost || run.handedOff
	skip := gone || handled
	run.reported = handled || !skip
	leaseEnd := run.leaseEnd
	run.mu.Unlock()
	w.mu.Lock()
	delete(w.running, job.ID())
	w.exec--
	if !gone { // an outcome, a timeout or a failure: the pace automatic prefetch follows
		w.ran(took)
	}
	w.wakeLanes()
	w.mu.Unlock()
	w.pump()
	if skip {
		return
	}
	token := job.Task.Lease.Token
	if out.err != nil {
		f := FailRequest{ID: job.ID(), Lease: token, Error: out.err.Error(), Worker: w.o.Name}
		var re *retryError
		var pe *permanentError
		switch {
		case errors.Is(out.err, context.DeadlineExceeded):
			f.Error = fmt.Sprintf("timeout: the handler ran past the task's timeout (%s)", timeout)
		case errors.As(out.err, &re):
			f.RetryIn = Duration(re.after)
		case errors.As(out.err, &pe):
			f.Permanent = true
		}
		w.push(report{fail: &f, leaseEnd: leaseEnd})
		return
	}
	c := CompleteRequest{ID: job.ID(), Lease: token, Result: out.value}
	if ns, ok := out.value.(*NextStage); ok {
		c = CompleteRequest{ID: job.ID(), Lease: token, Result: ns.Result, NextStage: ns.Stage, Payload: ns.Payload, Priority: ns.Priority}
		if ns.RunIn > 0 {
			c.RunIn = Duration(ns.RunIn)
		}
	}
	w.push(report{complete: &c, leaseEnd: leaseEnd})
}

// reporter sends the reports the claim loops do not carry, until the worker has drained and
// every report is out.
func (w *Worker) reporter(ctx context.Context) {
	for {
		// The state is read before waiting, never after a wake-up alone: reportReady holds
		// one wake-up, so one sent after this read is not lost.
		w.mu.Lock()
		if len(w.reports) > 0 && (w.carriers == 0 || w.drained) {
			n := len(w.reports)
			if n > maxReportBatch {
				n = maxReportBatch
			}
			batch := append([]report(nil), w.reports[:n]...)
			w.reports = w.reports[n:]
			w.mu.Unlock()
			w.deliver(ctx, batch)
			continue
		}
		done := w.drained && len(w.reports) == 0
		w.mu.Unlock()
		if done {
			return
		}
		<-w.reportReady
	}
}

func (w *Worker) deliver(ctx context.Context, batch []report) {
	delay := 100 * time.Millisecond
	for len(batch) > 0 {
		var completes []CompleteRequest
		var fails []FailRequest
		for _, r := range batch {
			if r.complete != nil {
				completes = append(completes, *r.complete)
			} else {
				fails = append(fails, *r.fail)
			}
		}
		var wg sync.WaitGroup
		var cOut, fOut []ItemOutcome
		var cErr, fErr error
		if len(completes) > 0 {
			wg.Add(1)
			go func() { defer wg.Done(); cOut, cErr = w.o.Client.CompleteMany(ctx, completes) }()
		}
		if len(fails) > 0 {
			wg.Add(1)
			go func() { defer wg.Done(); fOut, fErr = w.o.Client.FailMany(ctx, fails) }()
		}
		wg.Wait()
		// What went through is done; only the part that failed is sent again.
		if cErr == nil {
			w.settle(true, cOut)
		}
		if fErr == nil {
			w.settle(false, fOut)
		}
		// A part refused for what it is (4xx) is dropped; one that met an outage is retried.
		retry := func(err error) bool {
			var e *Error
			if err != nil && asError(err, &e) && e.Status < 500 && e.Status != 429 {
				w.o.Logger.Printf("docket worker %s: report refused, dropped: %v", w.o.Name, err)
				return false
			}
			return err != nil
		}
		rc, rf := retry(cErr), retry(fErr)
		kept := batch[:0]
		for _, r := range batch {
			if (r.complete != nil && rc) || (r.fail != nil && rf) {
				kept = append(kept, r)
			}
		}
		batch = kept
		if len(batch) == 0 {
			return
		}
		// Until delivered or the leases are over (the rescuer owns those tasks then). A request
		// that reached docket before the outage answered is sent again: completing twice
		// answers lease_lost, never a wrong state.
		time.Sleep(delay)
		if delay < 5*time.Second {
			delay *= 2
		}
		now := time.Now()
		live := batch[:0]
		for _, r := range batch {
			if r.leaseEnd.After(now) {
				live = append(live, r)
			}
		}
		batch = live
	}
}

func (w *Worker) beat(ctx context.Context, run *running) {
	run.mu.Lock()
	progress := run.progress
	run.mu.Unlock()
	t := run.job.Task
	_, err := w.o.Client.Heartbeat(ctx, t.ID, HeartbeatRequest{Lease: t.Lease.Token, Progress: progress})
	if err == nil {
		run.mu.Lock()
		run.leaseEnd = time.Now().Add(run.leaseLen)
		run.mu.Unlock()
		return
	}
	var e *Error
	if asError(err, &e) && (e.Status == 409 || e.Status == 404) {
		// cancelled, lease_lost, timed_out: the task is no longer ours.
		run.mu.Lock()
		run.lost = true
		run.mu.Unlock()
		run.cancel()
		return
	}
	w.o.Logger.Printf("docket worker %s: task %d: heartbeat failed: %v", w.o.Name, t.ID, err)
}

func (w *Worker) heartbeats(ctx context.Context) {
	for ctx.Err() == nil {
		now := time.Now()
		next := now.Add(time.Second)
		var due []*running
		w.mu.Lock()
		for _, r := range w.running {
			if !r.nextBeat.After(now) {
				r.nextBeat = now.Add(r.beatEvery)
				due = append(due, r)
			}
			if r.nextBeat.Before(next) {
				next = r.nextBeat
			}
		}
		w.mu.Unlock()
		var wg sync.WaitGroup
		for _, r := range due {
			wg.Add(1)
			go func(r *running) { defer wg.Done(); w.beat(ctx, r) }(r)
		}
		wg.Wait()
		sleep := time.Until(next)
		if sleep < 50*time.Millisecond {
			sleep = 50 * time.Millisecond
		}
		select {
		case <-time.After(sleep):
		case <-ctx.Done():
		}
	}
}

// newClaimID is a random (version 4) UUID for one claim.
func newClaimID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// releaseClaim hands back what claim id took, retrying an outage within the grace (at most
// 10 s); after that the leases end and the rescuer takes the tasks back.
func (w *Worker) releaseClaim(id string) {
	grace := w.o.ShutdownGrace
	if grace > 10*time.Second {
		grace = 10 * time.Second
	}
	end := time.Now().Add(grace)
	for delay := 100 * time.Millisecond; ; delay *= 2 {
		if delay > 2*time.Second {
			delay = 2 * time.Second
		}
		ctx, cancel := context.WithDeadline(context.Background(), end)
		back, err := w.o.Client.ReleaseClaim(ctx, w.o.Queue, id)
		cancel()
		if err == nil {
			if len(back) > 0 {
				w.o.Logger.Printf("docket worker %s: stopped mid-claim: handed back %d task(s)", w.o.Name, len(back))
			}
			return
		}
		var e *Error
		if (asError(err, &e) && e.Status < 500 && e.Status != 429) || time.Now().Add(delay).After(end) {
			w.o.Logger.Printf("docket worker %s: could not hand back the claim (its leases will end): %v", w.o.Name, err)
			return
		}
		time.Sleep(delay)
	}
}

func (w *Worker) drain() {
	// Held tasks not started go back at once, no attempt counted; the running ones get the
	// grace period.
	w.mu.Lock()
	held := w.buffer
	w.buffer = nil
	for _, r := range held {
		delete(w.running, r.job.ID())
	}
	w.mu.Unlock()
	if len(held) > 0 {
		items := make([]ReleaseItem, 0, len(held))
		for _, r := range held {
			items = append(items, ReleaseItem{ID: r.job.ID(), Lease: r.job.Task.Lease.Token})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		for i := 0; i < len(items) && err == nil; i += 500 {
			j := i + 500
			if j > len(items) {
				j = len(items)
			}
			_, err = w.o.Client.ReleaseMany(ctx, items[i:j])
		}
		cancel()
		if err != nil {
			// A server without the release route (before issue 37): failed with retry_in 0.
			w.o.Logger.Printf("docket worker %s: releasing held tasks failed (%v): handing them back as failures", w.o.Name, err)
			for _, r := range held {
				w.handBack(r)
			}
		} else {
			for _, r := range held {
				r.mu.Lock()
				r.handedOff = true
				r.mu.Unlock()
				r.cancel()
			}
		}
	}
	end := time.Now().Add(w.o.ShutdownGrace)
	for w.count() > 0 && time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond)
	}
	w.mu.Lock()
	left := make([]*running, 0, len(w.running))
	for _, r := range w.running {
		left = append(left, r)
	}
	w.mu.Unlock()
	for _, r := range left {
		w.handBack(r)
	}
}

// handBack fails a task in hand with retry_in 0 (it runs again at once) and stops its handler,
// unless its handler already ended and reported.
func (w *Worker) handBack(r *running) {
	r.mu.Lock()
	if r.reported {
		r.mu.Unlock()
		return
	}
	r.handedOff = true
	leaseEnd := r.leaseEnd
	r.mu.Unlock()
	w.push(report{fail: &FailRequest{ID: r.job.ID(), Lease: r.job.Task.Lease.Token,
		Error: "worker stopped: handed back", RetryIn: "0ms", Worker: w.o.Name}, leaseEnd: leaseEnd})
	r.cancel()
}

func (w *Worker) presence(ctx context.Context) {
	for ctx.Err() == nil {
		state := "idle"
		if w.count() > 0 {
			state = "work"
		}
		w.sendPresence(ctx, state)
		select {
		case <-time.After(w.o.ReportInterval):
		case <-ctx.Done():
		}
	}
}

func (w *Worker) sendPresence(ctx context.Context, state string) {
	if w.o.ReportInterval < 0 {
		return
	}
	w.mu.Lock()
	ids := make([]int64, 0, len(w.running))
	for id := range w.running {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	kinds, _ := w.kinds()
	host, _ := os.Hostname()
	started := w.started
	_ = w.o.Client.ReportWorker(ctx, w.o.Name, WorkerReport{State: state, Tasks: ids, Queue: w.o.Queue, Kinds: kinds,
		Concurrency: w.o.Concurrency, Host: host, Pid: os.Getpid(), StartedAt: &started, Interval: Duration(w.o.ReportInterval),
		Labels: w.o.Labels})
}

// CompletedCount is how many completions the worker has delivered so far.
func (w *Worker) CompletedCount() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.Completed
}
