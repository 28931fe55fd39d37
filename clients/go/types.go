package docket

import (
	"encoding/json"
	"time"
)

// The API's shapes, written by hand after crates/docket-server/openapi.json (no generator
// runs on Go 1.19 without the module proxy); openapi_test.go checks every JSON name here
// against the document's schema of the same name.

// Task is a stored task (schema Task).
type Task struct {
	ID                int64           `json:"id"`
	Queue             string          `json:"queue"`
	Kind              string          `json:"kind"`
	Payload           json.RawMessage `json:"payload"`
	State             string          `json:"state"`
	Priority          int32           `json:"priority"`
	Attempt           int32           `json:"attempt"`
	MaxAttempts       int32           `json:"max_attempts"`
	RunAt             time.Time       `json:"run_at"`
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
	AttemptedAt       *time.Time      `json:"attempted_at,omitempty"`
	FinishedAt        *time.Time      `json:"finished_at,omitempty"`
	ExpiresAt         *time.Time      `json:"expires_at,omitempty"`
	CancelRequestedAt *time.Time      `json:"cancel_requested_at,omitempty"`
	LeaseExpiresAt    *time.Time      `json:"lease_expires_at,omitempty"`
	Timeout           string          `json:"timeout"`
	Backoff           json.RawMessage `json:"backoff,omitempty"`
	UniqueKey         *string         `json:"unique_key,omitempty"`
	ConcurrencyKey    *string         `json:"concurrency_key,omitempty"`
	ConcurrencyLimit  *int32          `json:"concurrency_limit,omitempty"`
	RateLimit         string          `json:"rate_limit,omitempty"`
	PartitionKey      string          `json:"partition_key,omitempty"`
	Node              *string         `json:"node,omitempty"`
	AttemptNode       *string         `json:"attempt_node,omitempty"`
	Worker            *string         `json:"worker,omitempty"`
	Stage             *string         `json:"stage,omitempty"`
	StagesDone        []*string       `json:"stages_done,omitempty"`
	UserID            *string         `json:"user_id,omitempty"`
	TraceID           *string         `json:"trace_id,omitempty"`
	Result            json.RawMessage `json:"result,omitempty"`
	Progress          json.RawMessage `json:"progress,omitempty"`
	Errors            []TaskError     `json:"errors"`
	Runs              []TaskRun       `json:"runs,omitempty"`
	RunCount          int32           `json:"run_count,omitempty"`
	Inserted          *bool           `json:"inserted,omitempty"`
	Replaced          *bool           `json:"replaced,omitempty"`
	DebounceKey       *string         `json:"debounce_key,omitempty"`
	DeadLetterOf      *DeadLetterOf   `json:"dead_letter_of,omitempty"`
	Tags              []string        `json:"tags,omitempty"`
	Lease             *Lease          `json:"lease,omitempty"`
	Process           json.RawMessage `json:"process,omitempty"`
	BatchID           *int64          `json:"batch_id,omitempty"`
	// Requires and Prefer are the task's worker labels (NewTask.Requires, NewTask.Prefer).
	Requires map[string]string `json:"requires,omitempty"`
	Prefer   *Prefer           `json:"prefer,omitempty"`
	// Deps holds a workflow task's dependencies' results by ref (in a claim).
	Deps map[string]json.RawMessage `json:"deps,omitempty"`
	// Version is the task's ETag (from GetTask/UpdateTask), not a JSON field.
	Version string `json:"-"`
}

// Lease proves a worker holds a running task (schema Lease).
type Lease struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	TraceID   *string   `json:"trace_id,omitempty"`
}

// TaskError is one failed attempt (schema TaskError).
type TaskError struct {
	Attempt    int32     `json:"attempt"`
	At         time.Time `json:"at"`
	Message    string    `json:"message"`
	Worker     *string   `json:"worker,omitempty"`
	DurationMs *int64    `json:"duration_ms,omitempty"`
}

// DeadLetterOf is what a dead letter keeps of the task it stands for (schema DeadLetterOf): the
// discarded task (retry it with RetryTask), its queue and kind, and its errors, the last one last.
type DeadLetterOf struct {
	TaskID      int64       `json:"task_id"`
	Queue       string      `json:"queue"`
	Kind        string      `json:"kind"`
	Attempts    int32       `json:"attempts"`
	Errors      []TaskError `json:"errors"`
	DiscardedAt time.Time   `json:"discarded_at"`
}

// TaskRun is one attempt in the run log (schema TaskRun).
type TaskRun struct {
	Attempt    int32      `json:"attempt"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt time.Time  `json:"finished_at"`
	Outcome    string     `json:"outcome"`
	Message    *string    `json:"message,omitempty"`
	Node       *string    `json:"node,omitempty"`
	Worker     *string    `json:"worker,omitempty"`
	Stage      *string    `json:"stage,omitempty"`
	TraceID    *string    `json:"trace_id,omitempty"`
	DurationMs *int64     `json:"duration_ms,omitempty"`
}

// NewTask is a task to enqueue (schema NewTask). Durations are humantime strings
// (see Duration); nil/zero fields take docket's defaults.
type NewTask struct {
	Kind             string      `json:"kind"`
	Payload          interface{} `json:"payload"`
	Queue            string      `json:"queue,omitempty"`
	Priority         *int32      `json:"priority,omitempty"`
	RunAt            *time.Time  `json:"run_at,omitempty"`
	RunIn            string      `json:"run_in,omitempty"`
	UniqueKey        string      `json:"unique_key,omitempty"`
	ConcurrencyKey   string      `json:"concurrency_key,omitempty"`
	ConcurrencyLimit *int32      `json:"concurrency_limit,omitempty"`
	RateLimit        string      `json:"rate_limit,omitempty"`
	PartitionKey     string      `json:"partition_key,omitempty"`
	Timeout          string      `json:"timeout,omitempty"`
	Backoff          *Backoff    `json:"backoff,omitempty"`
	Stage            string      `json:"stage,omitempty"`
	UserID           string      `json:"user_id,omitempty"`
	TraceID          string      `json:"trace_id,omitempty"`
	MaxAttempts      *int32      `json:"max_attempts,omitempty"`
	ExpiresAt        *time.Time  `json:"expires_at,omitempty"`
	ExpiresIn        string      `json:"expires_in,omitempty"`
	Node             string      `json:"node,omitempty"`
	Progress         interface{} `json:"progress,omitempty"`
	// Debounce replaces the waiting task with its key instead of adding one (see Debounce).
	Debounce *Debounce `json:"debounce,omitempty"`
	// Tags ("customer:42", "plan:pro"): at most 20, each 1..128 characters, no duplicates; each
	// a filter of ListTasks (TaskFilter.Tag) and of bulk actions (BulkFilter.Tag).
	Tags []string `json:"tags,omitempty"`
	// Requires: worker labels a claim must carry to take the task, ever ({"gpu": "a100"}: at
	// most 20 pairs, names 1..64 and values 1..128 characters, no control characters); see
	// ClaimRequest.Labels and WorkerOptions.Labels.
	Requires map[string]string `json:"requires,omitempty"`
	// Prefer: labels a claim should carry, for a while after the task is due (see Prefer).
	Prefer *Prefer `json:"prefer,omitempty"`
}

// Prefer is NewTask's preference for worker labels (schema Prefer): for For (humantime,
// 0s..30 days; see Duration) after the task is due only a claim whose labels include Labels
// (at most 20 pairs, as NewTask.Requires) takes it, then any claim may.
type Prefer struct {
	Labels map[string]string `json:"labels"`
	For    string            `json:"for"`
}

// Debounce is NewTask's debounce by key (schema Debounce): while a task with Key waits
// (scheduled or available, never claimed), an enqueue with Key replaces it (Task.Replaced,
// the same ID) and moves its run_at to now + Period, never past its first enqueue + MaxWait.
// Durations are humantime strings (see Duration). It excludes RunAt, RunIn and UniqueKey, and
// one task per request.
type Debounce struct {
	Key     string `json:"key"`
	Period  string `json:"period"`
	MaxWait string `json:"max_wait,omitempty"`
}

// Backoff is a retry policy (schema Backoff): exponential (Initial, Coefficient, Max,
// Jitter) or linear (Kind "linear", Initial as the step, Max).
type Backoff struct {
	Kind        string   `json:"kind,omitempty"`
	Initial     string   `json:"initial,omitempty"`
	Coefficient *float64 `json:"coefficient,omitempty"`
	Max         string   `json:"max,omitempty"`
	Jitter      *float64 `json:"jitter,omitempty"`
}

// TaskPage is a page of ListTasks (schema TaskPage).
type TaskPage struct {
	Tasks     []Task `json:"tasks"`
	NextAfter *int64 `json:"next_after,omitempty"`
}

// TaskPatch changes a task (schema TaskPatch).
type TaskPatch struct {
	Priority    *int32      `json:"priority,omitempty"`
	RunAt       *time.Time  `json:"run_at,omitempty"`
	RunIn       string      `json:"run_in,omitempty"`
	Payload     interface{} `json:"payload,omitempty"`
	Progress    interface{} `json:"progress,omitempty"`
	Node        string      `json:"node,omitempty"`
	Queue       string      `json:"queue,omitempty"`
	MaxAttempts *int32      `json:"max_attempts,omitempty"`
	Stage       string      `json:"stage,omitempty"`
	Lease       string      `json:"lease,omitempty"`
	Attempt     *int32      `json:"attempt,omitempty"`
	Backoff     *Backoff    `json:"backoff,omitempty"`
	// Version applies the change only at this version (as UpdateTask's version argument).
	Version string `json:"version,omitempty"`
}

// ClaimRequest claims tasks of a queue (schema ClaimRequest).
type ClaimRequest struct {
	Worker string   `json:"worker"`
	Limit  int      `json:"limit,omitempty"`
	Lease  string   `json:"lease,omitempty"`
	Wait   string   `json:"wait,omitempty"`
	Kinds  []string `json:"kinds,omitempty"`
	Stages []string `json:"stages,omitempty"`
	// Labels are the claim's worker labels ({"gpu": "a100", "region": "eu"}: at most 20 pairs,
	// names 1..64 and values 1..128 characters): it takes the tasks whose Requires (and, until
	// their preference runs out, Prefer.Labels) they include. A claim without labels takes only
	// tasks that require nothing and prefer nothing (or whose preference ran out).
	Labels map[string]string `json:"labels,omitempty"`
	// ClaimID (a random UUID) lets Client.ReleaseClaim hand back what the claim took should
	// its answer never arrive (a stop mid-claim).
	ClaimID string `json:"claim_id,omitempty"`
	// Lean asks for lean tasks (ClaimResponse.Lean, Tasks then empty): only what a handler
	// needs; Client.GetTask reads the rest.
	Lean bool `json:"lean,omitempty"`
	// Complete and Fail (each item with its ID) are recorded and committed before the claim
	// looks for work: report what finished and ask for more in one round trip. Their outcomes
	// are ClaimResponse.Completed and Failed, in order; one bad item refuses the whole request
	// (400) with nothing written.
	Complete []CompleteRequest `json:"complete,omitempty"`
	Fail     []FailRequest     `json:"fail,omitempty"`
}

// ClaimResponse is the whole answer of a claim (schema ClaimResponse): the claimed tasks in
// Tasks, or in Lean when the claim asked for lean ones, and the outcomes of its Complete and
// Fail items (absent without them).
type ClaimResponse struct {
	Tasks     []Task        `json:"tasks"`
	Lean      []LeanTask    `json:"lean,omitempty"`
	Completed []ItemOutcome `json:"completed,omitempty"`
	Failed    []ItemOutcome `json:"failed,omitempty"`
}

// LeanTask is a claimed task as a lean claim answers it (schema LeanTask): what a handler
// needs and a worker uses to hold the lease.
type LeanTask struct {
	ID          int64           `json:"id"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload"`
	Attempt     int32           `json:"attempt"`
	MaxAttempts int32           `json:"max_attempts"`
	Stage       *string         `json:"stage,omitempty"`
	Timeout     string          `json:"timeout"`
	AttemptedAt *time.Time      `json:"attempted_at,omitempty"`
	Lease       Lease           `json:"lease"`
	TraceID     *string         `json:"trace_id,omitempty"`
	Process     json.RawMessage `json:"process,omitempty"`
	BatchID     *int64          `json:"batch_id,omitempty"`
	// Deps holds a workflow task's dependencies' results by ref.
	Deps map[string]json.RawMessage `json:"deps,omitempty"`
}

// AsTask is the lean task as a Task of queue: the fields a lean claim answers, Queue, State
// "running" and LeaseExpiresAt; the others are zero (Client.GetTask reads them).
func (t *LeanTask) AsTask(queue string) Task {
	lease := t.Lease
	expires := lease.ExpiresAt
	return Task{ID: t.ID, Queue: queue, Kind: t.Kind, Payload: t.Payload, State: "running", Attempt: t.Attempt,
		MaxAttempts: t.MaxAttempts, AttemptedAt: t.AttemptedAt, LeaseExpiresAt: &expires, Timeout: t.Timeout,
		Stage: t.Stage, TraceID: t.TraceID, Lease: &lease, Process: t.Process, BatchID: t.BatchID, Deps: t.Deps}
}

// ReleaseItem is a task held but not started, handed back by Client.ReleaseMany (schema
// ReleaseItem).
type ReleaseItem struct {
	ID    int64  `json:"id"`
	Lease string `json:"lease"`
}

// ClaimReleased is the answer of Client.ReleaseClaim (schema ClaimReleased).
type ClaimReleased struct {
	Released []int64 `json:"released"`
}

// CompleteRequest is one completion (schema CompleteRequest); with NextStage it hands the
// task on to that stage instead.
type CompleteRequest struct {
	ID        int64       `json:"id,omitempty"`
	Lease     string      `json:"lease"`
	Result    interface{} `json:"result"`
	NextStage string      `json:"next_stage,omitempty"`
	Payload   interface{} `json:"payload,omitempty"`
	Priority  *int32      `json:"priority,omitempty"`
	RunAt     *time.Time  `json:"run_at,omitempty"`
	RunIn     string      `json:"run_in,omitempty"`
}

// FailRequest is one failure (schema FailRequest).
type FailRequest struct {
	ID        int64  `json:"id,omitempty"`
	Lease     string `json:"lease"`
	Error     string `json:"error"`
	RetryIn   string `json:"retry_in,omitempty"`
	Permanent bool   `json:"permanent,omitempty"`
	Worker    string `json:"worker,omitempty"`
}

// HeartbeatRequest keeps a lease (schema HeartbeatRequest).
type HeartbeatRequest struct {
	Lease    string      `json:"lease"`
	Progress interface{} `json:"progress,omitempty"`
	Extend   string      `json:"extend,omitempty"`
}

// ItemOutcome is the answer for one item of a batch (schema ItemOutcome): Outcome is ok,
// lease_lost, cancelled, timed_out or not_found.
type ItemOutcome struct {
	ID      int64      `json:"id"`
	Outcome string     `json:"outcome"`
	State   *string    `json:"state,omitempty"`
	RunAt   *time.Time `json:"run_at,omitempty"`
}

// QueueSettings are a queue's settings (schema QueueSettings).
type QueueSettings struct {
	Paused             *bool            `json:"paused,omitempty"`
	ConcurrencyLimit   *int32           `json:"concurrency_limit,omitempty"`
	ScheduleLimit      *int32           `json:"schedule_limit,omitempty"`
	ScheduleInterval   *string          `json:"schedule_interval,omitempty"`
	MaxAttempts        *int32           `json:"max_attempts,omitempty"`
	Backoff            *Backoff         `json:"backoff,omitempty"`
	Timeout            *string          `json:"timeout,omitempty"`
	RetentionCompleted *string          `json:"retention_completed,omitempty"`
	RetentionFailed    *string          `json:"retention_failed,omitempty"`
	MaskPayload        *bool            `json:"mask_payload,omitempty"`
	RateLimit          *string          `json:"rate_limit,omitempty"`
	DeadLetter         *string          `json:"dead_letter,omitempty"`
	Fair               bool             `json:"fair,omitempty"`
	PartitionWeights   map[string]int32 `json:"partition_weights,omitempty"`
	PartitionLimit     *int32           `json:"partition_limit,omitempty"`
}

// RateLimitSpec is the body of PUT /v1/rate-limits/{name} (schema RateLimitSpec).
type RateLimitSpec struct {
	Kind   string `json:"kind"`
	Limit  int64  `json:"limit"`
	Period string `json:"period,omitempty"`
}

// RateLimit is a named rate limit with its cluster-wide totals (schema RateLimit).
type RateLimit struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Limit     int64     `json:"limit"`
	Period    string    `json:"period,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Keys      int64     `json:"keys"`
	Admitted  int64     `json:"admitted"`
	Delayed   int64     `json:"delayed"`
	Blocked   int64     `json:"blocked"`
}

// RateLimitList is the answer of GET /v1/rate-limits (schema RateLimitList).
type RateLimitList struct {
	RateLimits []RateLimit `json:"rate_limits"`
}

// QueueStats is a queue with its counts by state (schema QueueStats).
type QueueStats struct {
	Name      string           `json:"name"`
	Settings  QueueSettings    `json:"settings"`
	Counts    map[string]int64 `json:"counts"`
	CreatedAt *time.Time       `json:"created_at,omitempty"`
	UpdatedAt *time.Time       `json:"updated_at,omitempty"`
}

// ScheduleSpec creates or replaces a schedule (schema ScheduleSpec).
type ScheduleSpec struct {
	Name     string     `json:"name"`
	Task     NewTask    `json:"task"`
	Every    string     `json:"every,omitempty"`
	Cron     string     `json:"cron,omitempty"`
	Timezone string     `json:"timezone,omitempty"`
	Drift    bool       `json:"drift,omitempty"`
	AfterEnd bool       `json:"after_end,omitempty"`
	StartAt  *time.Time `json:"start_at,omitempty"`
}

// Schedule is a stored schedule; docket answers the spec's fields and its state.
type Schedule map[string]interface{}

// Event is one event of a process's history (schema Event).
type Event struct {
	EventID   int64           `json:"event_id"`
	TaskID    *int64          `json:"task_id,omitempty"`
	Timestamp time.Time       `json:"timestamp"`
	Metadata  json.RawMessage `json:"metadata"`
	Payload   json.RawMessage `json:"payload"`
}

// Process is a process's state (schema Process).
type Process struct {
	ID              string          `json:"id"`
	Namespace       string          `json:"namespace"`
	Status          string          `json:"status"`
	PreviousStatus  *string         `json:"previous_status,omitempty"`
	Detail          *string         `json:"detail,omitempty"`
	AuxState        json.RawMessage `json:"aux_state,omitempty"`
	Metadata        json.RawMessage `json:"metadata,omitempty"`
	CorruptedBy     *int64          `json:"corrupted_by,omitempty"`
	LastEventID     int64           `json:"last_event_id"`
	CreatedAt       *time.Time      `json:"created_at,omitempty"`
	StatusChangedAt *time.Time      `json:"status_changed_at,omitempty"`
}

// ProcessView is a process with its history (schema ProcessView).
type ProcessView struct {
	Process     Process `json:"process"`
	History     []Event `json:"history"`
	LastEventID int64   `json:"last_event_id"`
}

// Notification is one item of the event stream (schema Notification).
type Notification struct {
	Seq       int64           `json:"seq"`
	Namespace string          `json:"namespace"`
	ProcessID string          `json:"process_id"`
	Kind      string          `json:"kind"`
	EventID   *int64          `json:"event_id,omitempty"`
	Data      json.RawMessage `json:"data"`
	CreatedAt time.Time       `json:"created_at"`
}

// WorkerReport is a worker's report to /v1/workers (schema WorkerReport).
type WorkerReport struct {
	State       string     `json:"state"`
	Tasks       []int64    `json:"tasks"`
	Queue       string     `json:"queue,omitempty"`
	Kinds       []string   `json:"kinds"`
	Concurrency int        `json:"concurrency,omitempty"`
	Host        string     `json:"host,omitempty"`
	Pid         int        `json:"pid,omitempty"`
	Restarts    int        `json:"restarts"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	Interval    string     `json:"interval"`
	// Labels are the labels the worker claims with (WorkerOptions.Labels; none: left out).
	Labels map[string]string `json:"labels,omitempty"`
}

// WorkerView is a worker as /v1/workers lists it (schema WorkerView).
type WorkerView struct {
	Name       string       `json:"name"`
	State      string       `json:"state"`
	ReportedAt time.Time    `json:"reported_at"`
	Report     WorkerReport `json:"report"`
}

// TokenCreateRequest creates an API token (schema TokenCreateRequest).
type TokenCreateRequest struct {
	Name      string   `json:"name"`
	Scopes    []string `json:"scopes"`
	Queues    []string `json:"queues,omitempty"`
	ExpiresIn string   `json:"expires_in,omitempty"`
}

// TokenView is a token without its secret (schema TokenView).
type TokenView struct {
	Name       string     `json:"name"`
	Scopes     []string   `json:"scopes"`
	Queues     []string   `json:"queues"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// TokenCreated is a new token; Token is shown this once (schema TokenCreated).
type TokenCreated struct {
	Token string    `json:"token"`
	Info  TokenView `json:"info"`
}

// ProcessorRequest is what docket POSTs to a processor (schema ProcessorRequest).
type ProcessorRequest struct {
	TaskType string           `json:"task_type"`
	Args     json.RawMessage  `json:"args"`
	Context  json.RawMessage  `json:"context"`
	Process  ProcessorProcess `json:"process"`
}

// ProcessorProcess is the process as a processor sees it (schema ProcessorProcess).
type ProcessorProcess struct {
	ID             string          `json:"id"`
	Namespace      string          `json:"namespace"`
	Status         string          `json:"status"`
	PreviousStatus json.RawMessage `json:"previous_status,omitempty"`
	Detail         *string         `json:"detail,omitempty"`
	AuxState       json.RawMessage `json:"aux_state"`
	Metadata       json.RawMessage `json:"metadata"`
	History        []Event         `json:"history"`
	LastEventID    int64           `json:"last_event_id"`
	CorruptedBy    *int64          `json:"corrupted_by,omitempty"`
}

// NewEvent is an event a processor appends (schema NewEvent).
type NewEvent struct {
	Payload  interface{} `json:"payload"`
	Metadata interface{} `json:"metadata,omitempty"`
}

// NewBatch is a batch to create (schema NewBatch): tasks, and callbacks enqueued once when
// every task finished; Open waits for SealBatch.
type NewBatch struct {
	Name      string    `json:"name,omitempty"`
	Tasks     []NewTask `json:"tasks,omitempty"`
	Callbacks Callbacks `json:"callbacks"`
	Open      bool      `json:"open,omitempty"`
}

// Callbacks are a batch's callback task specs (schema Callbacks).
type Callbacks struct {
	Completed *NewTask `json:"completed,omitempty"`
	Succeeded *NewTask `json:"succeeded,omitempty"`
	Discarded *NewTask `json:"discarded,omitempty"`
	Cancelled *NewTask `json:"cancelled,omitempty"`
}

// Batch is a batch and its progress (schema Batch).
type Batch struct {
	ID        int64            `json:"id"`
	Name      *string          `json:"name,omitempty"`
	Open      bool             `json:"open"`
	Total     int64            `json:"total"`
	Done      int64            `json:"done"`
	Counts    map[string]int64 `json:"counts"`
	Callbacks json.RawMessage  `json:"callbacks"`
	Fired     map[string]int64 `json:"fired"`
	CreatedAt time.Time        `json:"created_at"`
	SettledAt *time.Time       `json:"settled_at,omitempty"`
}

// BatchCreated answers CreateBatch and AddToBatch (schema BatchCreated).
type BatchCreated struct {
	Batch Batch  `json:"batch"`
	Tasks []Task `json:"tasks"`
}

// NewWorkflow is a workflow to create (schema NewWorkflow): tasks with refs and dependencies.
type NewWorkflow struct {
	Name      string         `json:"name,omitempty"`
	Tasks     []WorkflowTask `json:"tasks"`
	Workflows []SubWorkflow  `json:"workflows,omitempty"`
	Callbacks Callbacks      `json:"callbacks"`
}

// SubWorkflow is a workflow inside a workflow (schema SubWorkflow): its tasks' refs become
// "{Ref}/{task ref}"; depending on Ref means depending on all of its tasks.
type SubWorkflow struct {
	Ref       string         `json:"ref"`
	DependsOn []interface{}  `json:"depends_on,omitempty"`
	Tasks     []WorkflowTask `json:"tasks"`
	Workflows []SubWorkflow  `json:"workflows,omitempty"`
}

// WorkflowAddition is what AddToWorkflow adds (schema WorkflowAddition); DependsOn may name
// the workflow's refs.
type WorkflowAddition struct {
	Tasks     []WorkflowTask `json:"tasks"`
	Workflows []SubWorkflow  `json:"workflows,omitempty"`
}

// WorkflowTask is a task spec with its ref and what it waits for (schema WorkflowTask); each
// entry of DependsOn is a ref (string) or {"ref": r, "ignore_failure": true}.
type WorkflowTask struct {
	NewTask
	Ref       string        `json:"ref"`
	DependsOn []interface{} `json:"depends_on,omitempty"`
}

// Workflow is a workflow's batch and graph (schema Workflow).
type Workflow struct {
	Batch Batch          `json:"batch"`
	Tasks []WorkflowNode `json:"tasks"`
}

// WorkflowNode is one task of a workflow (schema WorkflowNode).
type WorkflowNode struct {
	Ref       string        `json:"ref"`
	ID        int64         `json:"id"`
	Kind      string        `json:"kind"`
	State     string        `json:"state"`
	Waiting   bool          `json:"waiting"`
	DependsOn []interface{} `json:"depends_on"`
}

// WorkflowCreated answers CreateWorkflow (schema WorkflowCreated).
type WorkflowCreated struct {
	Workflow Workflow `json:"workflow"`
	Tasks    []Task   `json:"tasks"`
}

// BulkFilter says which tasks a bulk action takes (schema BulkFilter): the filters an index
// serves. No States: every state the action changes.
type BulkFilter struct {
	Queue          string   `json:"queue,omitempty"`
	States         []string `json:"states,omitempty"`
	Kind           string   `json:"kind,omitempty"`
	UserID         string   `json:"user_id,omitempty"`
	UniqueKey      string   `json:"unique_key,omitempty"`
	ConcurrencyKey string   `json:"concurrency_key,omitempty"`
	Tag            string   `json:"tag,omitempty"`
}

// BulkJob is a bulk action and its progress (schema BulkJob).
type BulkJob struct {
	ID         int64      `json:"id"`
	Action     string     `json:"action"`
	Filter     BulkFilter `json:"filter"`
	State      string     `json:"state"`
	Total      int64      `json:"total"`
	More       bool       `json:"more"`
	Done       int64      `json:"done"`
	Skipped    int64      `json:"skipped"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Error      *string    `json:"error"`
}

// BulkCount is a dry run's answer (schema BulkCount).
type BulkCount struct {
	Action string `json:"action"`
	Total  int64  `json:"total"`
	More   bool   `json:"more"`
}
