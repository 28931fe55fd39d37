package docket

// Durable functions against real `docket serve`s (clients/test.sh): the shared servers of
// DOCKET_TEST_SERVERS, and servers these tests start themselves on fresh databases of their
// own (a restart, two nodes) with DOCKET_BIN.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var quiet = log.New(io.Discard, "", 0)

// workOn runs a worker of the workflow queue q (register adds the workflows) until the test
// ends.
func workOn(t *testing.T, c *Client, q string, register func(w *Worker)) *Worker {
	t.Helper()
	w := must(NewWorker(WorkerOptions{Client: c, WorkflowQueue: q, Wait: time.Second, ShutdownGrace: 5 * time.Second,
		ReportInterval: -1, Logger: quiet}))
	register(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return w
}

// result waits (up to d) for run id to finish and returns it.
func result(t *testing.T, c *Client, id string, d time.Duration) *WorkflowRun {
	t.Helper()
	run := must(c.WorkflowResult(context.Background(), id, d))
	if !run.Finished() {
		t.Fatalf("run %s not finished after %s: %+v", id, d, run)
	}
	return run
}

func runState(t *testing.T, c *Client, id string, states ...string) func() bool {
	return func() bool {
		r := must(c.WorkflowRun(context.Background(), id))
		for _, s := range states {
			if r.State == s {
				return true
			}
		}
		return false
	}
}

func decode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

// sameJSON reports whether raw is the JSON value want (whatever its spacing).
func sameJSON(raw json.RawMessage, want string) bool {
	var a, b interface{}
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// counter counts executions by name.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(name string) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
	c.mu.Unlock()
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// The client calls: start idempotent by id (another workflow's id refused), result with wait,
// steps, cancel (its events refused after), list by workflow and state, retry.
func TestWorkflowClientCalls(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		var steps counter
		workOn(t, c, q, func(w *Worker) {
			w.Workflow("greet", func(wf *WorkflowContext, input json.RawMessage) (interface{}, error) {
				var in struct{ Name string }
				_ = json.Unmarshal(input, &in)
				hello, err := StepAs(wf, "hello", func() (string, error) { steps.add(wf.RunID()); return "hello, " + in.Name, nil })
				return map[string]string{"greeting": hello}, err
			})
			w.Workflow("waits", func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
				p, _ := wf.WaitForEvent("go", 0)
				return p, nil
			})
		})
		id := q + "-order-42"
		run := must(c.StartWorkflow(ctx, "greet", map[string]string{"name": "Ada"}, StartOptions{ID: id, Queue: q}))
		if !run.Created || run.ID != id || run.Workflow != "greet" || run.Queue != q {
			t.Fatalf("started: %+v", run)
		}
		again := must(c.StartWorkflow(ctx, "greet", map[string]string{"name": "Bob"}, StartOptions{ID: id, Queue: q}))
		if again.Created || again.ID != id || !sameJSON(again.Input, `{"name":"Ada"}`) {
			t.Fatalf("again: %+v", again)
		}
		if _, err := c.StartWorkflow(ctx, "waits", nil, StartOptions{ID: id, Queue: q}); !IsCode(err, "conflict") {
			t.Fatalf("another workflow's id: want conflict, got %v", err)
		}
		done := result(t, c, id, 30*time.Second)
		if done.State != "completed" || decode[map[string]string](t, done.Result)["greeting"] != "hello, Ada" || done.FinishedAt == nil {
			t.Fatalf("result: %+v %s", done, done.Result)
		}
		journal := must(c.WorkflowSteps(ctx, id))
		if len(journal) != 1 || journal[0].Kind != "step" || journal[0].Name != "hello" || journal[0].State != "completed" ||
			journal[0].Attempts != 1 || !sameJSON(journal[0].Output, `"hello, Ada"`) {
			t.Fatalf("journal: %+v", journal)
		}
		if steps.get(id) != 1 {
			t.Fatalf("step ran %d times", steps.get(id))
		}
		if _, err := c.WorkflowRun(ctx, q+"-nothing"); !IsCode(err, "not_found") {
			t.Fatalf("want not_found, got %v", err)
		}
		// A run waiting for an event, cancelled.
		waiting := must(c.StartWorkflow(ctx, "waits", nil, StartOptions{Queue: q}))
		if waiting.ID == "" || !waiting.Created {
			t.Fatalf("%+v", waiting)
		}
		waitFor(t, 30*time.Second, runState(t, c, waiting.ID, "waiting"))
		cancelled := must(c.CancelWorkflowRun(ctx, waiting.ID))
		if cancelled.State != "cancelled" {
			t.Fatalf("cancel: %+v", cancelled)
		}
		if _, err := c.SendEvent(ctx, waiting.ID, "go", 1); !IsCode(err, "invalid_state") {
			t.Fatalf("an event to a cancelled run: want invalid_state, got %v", err)
		}
		if _, err := c.SendEvent(ctx, id, "docket:x", 1); err == nil {
			t.Fatal("an event named docket:… was accepted")
		}
		// Listed by workflow and state, newest first.
		other := must(c.StartWorkflow(ctx, "greet", map[string]string{"name": "Cy"}, StartOptions{Queue: q}))
		result(t, c, other.ID, 30*time.Second)
		greets := must(c.ListWorkflowRuns(ctx, WorkflowRunFilter{Workflow: "greet", State: "completed", Limit: 500}))
		var mine []string
		for _, r := range greets {
			if r.Queue == q {
				mine = append(mine, r.ID)
			}
			if r.Workflow != "greet" || r.State != "completed" {
				t.Fatalf("listed %+v", r)
			}
		}
		if fmt.Sprint(mine) != fmt.Sprint([]string{other.ID, id}) {
			t.Fatalf("listed %v, want %v", mine, []string{other.ID, id})
		}
		gone := must(c.ListWorkflowRuns(ctx, WorkflowRunFilter{Workflow: "waits", State: "cancelled", Limit: 500}))
		found := false
		for _, r := range gone {
			found = found || r.ID == waiting.ID
		}
		if !found {
			t.Fatalf("the cancelled run is not listed: %+v", gone)
		}
		// A cancelled run retried waits again, and takes its event.
		must(c.RetryWorkflowRun(ctx, waiting.ID))
		waitFor(t, 30*time.Second, runState(t, c, waiting.ID, "waiting"))
		if sent := must(c.SendEvent(ctx, waiting.ID, "go", map[string]int{"n": 1})); !sent.Delivered {
			t.Fatalf("%+v", sent)
		}
		if r := result(t, c, waiting.ID, 30*time.Second); r.State != "completed" || !sameJSON(r.Result, `{"n":1}`) {
			t.Fatalf("%+v %s", r, r.Result)
		}
	})
}

// One worker with task handlers and workflows works both queues, and stops both.
func TestWorkerWithTasksAndWorkflows(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		tq, wq := uniq(), uniq()
		w := must(NewWorker(WorkerOptions{Client: c, Queue: tq, WorkflowQueue: wq, Wait: time.Second, Logger: quiet}))
		w.Register("email", func(ctx context.Context, job *Job) (interface{}, error) { return "sent", nil })
		w.Workflow("signup", func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
			// A step enqueues a task, once.
			return StepAs(wf, "enqueue", func() (int64, error) {
				task, err := c.Enqueue(wf.Context(), NewTask{Kind: "email", Queue: tq})
				if err != nil {
					return 0, err
				}
				return task.ID, nil
			})
		})
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		run := must(c.StartWorkflow(ctx, "signup", nil, StartOptions{Queue: wq}))
		r := result(t, c, run.ID, 30*time.Second)
		id := decode[int64](t, r.Result)
		waitFor(t, 30*time.Second, func() bool { return must(c.GetTask(ctx, id)).State == "completed" })
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return")
		}
		if w.CompletedCount() != 1 {
			t.Fatalf("completed %d tasks", w.CompletedCount())
		}
	})
}

// A run cancelled in the middle of a step: the worker's heartbeat learns it, the step's
// context ends, and nothing more is recorded or reported.
func TestWorkflowCancelledMidStep(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		began, ended := make(chan string, 1), make(chan error, 1)
		var after counter
		w := must(NewWorker(WorkerOptions{Client: c, WorkflowQueue: q, Lease: 3 * time.Second, Wait: time.Second,
			ReportInterval: -1, Logger: quiet}))
		w.Workflow("blocking", func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
			_, _ = wf.Step("block", func() (interface{}, error) {
				began <- wf.RunID()
				select {
				case <-wf.Context().Done():
					ended <- wf.Context().Err()
				case <-time.After(30 * time.Second):
					ended <- nil
				}
				return "late", nil
			})
			_, _ = wf.Step("after", func() (interface{}, error) { after.add("after"); return nil, nil })
			return "done", nil
		})
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		defer func() { cancel(); <-done }()
		run := must(c.StartWorkflow(ctx, "blocking", nil, StartOptions{Queue: q}))
		select {
		case <-began:
		case <-time.After(30 * time.Second):
			t.Fatal("the step did not start")
		}
		if r := must(c.CancelWorkflowRun(ctx, run.ID)); r.State != "cancelled" {
			t.Fatalf("%+v", r)
		}
		select {
		case err := <-ended:
			if err == nil {
				t.Fatal("the step's context did not end")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the step did not end")
		}
		time.Sleep(300 * time.Millisecond)
		if got := must(c.WorkflowRun(ctx, run.ID)); got.State != "cancelled" || after.get("after") != 0 ||
			len(must(c.WorkflowSteps(ctx, run.ID))) != 0 {
			t.Fatalf("%+v, after ran %d times", got, after.get("after"))
		}
		if task := must(c.GetTask(ctx, run.TaskID)); task.State != "cancelled" {
			t.Fatalf("the run's task: %s", task.State)
		}
	})
}

// (c) an event sent before the wait starts and one sent after, both received; (d) a wait that
// times out.
func TestWorkflowEvents(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		approvals := func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
			first, ok1 := wf.WaitForEvent("first", time.Minute)
			second, ok2 := wf.WaitForEvent("second", 0)
			_, ok3 := wf.WaitForEvent("never", time.Second)
			return []interface{}{first, ok1, second, ok2, ok3}, nil
		}
		run := must(c.StartWorkflow(ctx, "approvals", nil, StartOptions{Queue: q}))
		// Before any worker runs it: the event waits in the mailbox.
		if sent := must(c.SendEvent(ctx, run.ID, "first", map[string]string{"by": "ann"})); sent.Delivered {
			t.Fatalf("delivered before the wait: %+v", sent)
		}
		workOn(t, c, q, func(w *Worker) { w.Workflow("approvals", approvals) })
		waitFor(t, 30*time.Second, func() bool {
			r := must(c.WorkflowRun(ctx, run.ID))
			return r.State == "waiting" && r.WaitingFor != nil && *r.WaitingFor == "second"
		})
		if sent := must(c.SendEvent(ctx, run.ID, "second", "go")); !sent.Delivered {
			t.Fatalf("not delivered to the waiting run: %+v", sent)
		}
		done := result(t, c, run.ID, 30*time.Second)
		if done.State != "completed" || !sameJSON(done.Result, `[{"by":"ann"},true,"go",true,false]`) {
			t.Fatalf("%+v %s", done, done.Result)
		}
		var kinds []string
		for _, e := range must(c.WorkflowSteps(ctx, run.ID)) {
			kinds = append(kinds, e.Kind+":"+e.Name+":"+e.State)
		}
		if fmt.Sprint(kinds) != "[event:first:completed event:second:completed event:never:timed_out]" {
			t.Fatalf("journal %v", kinds)
		}
	})
}

// (e) a child workflow awaited, one started without awaiting, one that fails; listed by parent.
func TestWorkflowChildren(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		workOn(t, c, q, func(w *Worker) {
			w.Workflow("child", func(wf *WorkflowContext, input json.RawMessage) (interface{}, error) {
				var n int
				_ = json.Unmarshal(input, &n)
				if n < 0 {
					return nil, errors.New("negative")
				}
				return wf.Step("double", func() (interface{}, error) { return 2 * n, nil })
			})
			w.Workflow("parent", func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
				a := wf.StartChild("child", 21) // the parent's queue
				loose := wf.StartChild("child", 5, ChildOptions{ID: wf.RunID() + "-loose", Queue: q})
				bad := wf.StartChild("child", -1)
				got, err := a.Result()
				if err != nil {
					return nil, err
				}
				_, err = bad.Result()
				var cf *ChildFailed
				if !errors.As(err, &cf) || cf.State != "failed" || cf.Message != "negative" {
					return nil, fmt.Errorf("want ChildFailed, got %v", err)
				}
				return map[string]interface{}{"got": got, "loose": loose.ID, "bad": err.Error()}, nil
			})
		})
		run := must(c.StartWorkflow(ctx, "parent", nil, StartOptions{Queue: q}))
		done := result(t, c, run.ID, 60*time.Second)
		out := decode[map[string]interface{}](t, done.Result)
		if done.State != "completed" || out["got"] != 42.0 || out["loose"] != run.ID+"-loose" ||
			out["bad"] != fmt.Sprintf("child workflow child run %s:2 failed: negative", run.ID) {
			t.Fatalf("%+v %s", done, done.Result)
		}
		loose := result(t, c, run.ID+"-loose", 30*time.Second)
		if loose.State != "completed" || !sameJSON(loose.Result, "10") || loose.ParentID == nil || *loose.ParentID != run.ID {
			t.Fatalf("the child not awaited: %+v", loose)
		}
		kids := must(c.ListWorkflowRuns(ctx, WorkflowRunFilter{ParentID: run.ID}))
		if len(kids) != 3 {
			t.Fatalf("children listed: %+v", kids)
		}
	})
}

// (f) non-determinism: the code changed under a sleeping run asks for another step; the run
// fails naming both; fixed and retried, it completes. (h) Patched: an old run replays the old
// path, a new run takes the new one.
func TestWorkflowNonDeterminismAndPatches(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		var version atomic.Int32
		var ran counter
		step := func(wf *WorkflowContext, name string) {
			_, _ = wf.Step(name, func() (interface{}, error) { ran.add(wf.RunID() + "/" + name); return name, nil })
		}
		workOn(t, c, q, func(w *Worker) {
			w.Workflow("changing", func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
				if version.Load() == 2 {
					step(wf, "b") // the bad deploy: another first step
				}
				step(wf, "a")
				wf.Sleep(time.Second)
				step(wf, "c")
				return "ok", nil
			})
			w.Workflow("patching", func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
				step(wf, "before")
				path := "old"
				if version.Load() >= 1 && wf.Patched("new-path") {
					path = "new"
				}
				step(wf, path)
				_, _ = wf.WaitForEvent("go", 0)
				return path, nil
			})
		})
		// (f)
		bad := must(c.StartWorkflow(ctx, "changing", nil, StartOptions{Queue: q}))
		old := must(c.StartWorkflow(ctx, "patching", nil, StartOptions{Queue: q}))
		waitFor(t, 30*time.Second, runState(t, c, old.ID, "waiting"))
		waitFor(t, 30*time.Second, func() bool { return ran.get(bad.ID+"/a") == 1 })
		version.Store(2)
		failed := result(t, c, bad.ID, 30*time.Second)
		want := fmt.Sprintf(`non-determinism: workflow changing run %s: journal entry 0 is step "a" but the code asked for step "b"`, bad.ID)
		if failed.State != "failed" || failed.Error == nil || *failed.Error != want {
			t.Fatalf("want the run failed with %q, got %+v", want, failed)
		}
		if ran.get(bad.ID+"/b") != 0 || ran.get(bad.ID+"/c") != 0 {
			t.Fatalf("ran past the non-determinism: %v", ran.n)
		}
		version.Store(1) // fixed: retried, the run replays and completes
		must(c.RetryWorkflowRun(ctx, bad.ID))
		if r := result(t, c, bad.ID, 30*time.Second); r.State != "completed" || ran.get(bad.ID+"/a") != 1 || ran.get(bad.ID+"/c") != 1 {
			t.Fatalf("retried: %+v %v", r, ran.n)
		}
		// (h) the old run (waiting, made before the patch) replays the old path; a new one takes
		// the new path.
		fresh := must(c.StartWorkflow(ctx, "patching", nil, StartOptions{Queue: q}))
		waitFor(t, 30*time.Second, runState(t, c, fresh.ID, "waiting"))
		for _, id := range []string{old.ID, fresh.ID} {
			must(c.SendEvent(ctx, id, "go", nil))
		}
		if r := result(t, c, old.ID, 30*time.Second); r.State != "completed" || !sameJSON(r.Result, `"old"`) {
			t.Fatalf("old run: %+v %s", r, r.Result)
		}
		if r := result(t, c, fresh.ID, 30*time.Second); r.State != "completed" || !sameJSON(r.Result, `"new"`) {
			t.Fatalf("new run: %+v %s", r, r.Result)
		}
		if ran.get(old.ID+"/old") != 1 || ran.get(old.ID+"/new") != 0 || ran.get(fresh.ID+"/new") != 1 || ran.get(fresh.ID+"/old") != 0 {
			t.Fatalf("%v", ran.n)
		}
		var kinds []string
		for _, e := range must(c.WorkflowSteps(ctx, fresh.ID)) {
			kinds = append(kinds, e.Kind+":"+e.Name)
		}
		if fmt.Sprint(kinds) != "[step:before patch:new-path step:new event:go]" {
			t.Fatalf("the new run's journal: %v", kinds)
		}
	})
}

// Now, Random, UUID and a step's failures are recorded: a replay (after a sleep) returns the
// same values, and the failed step is not run again.
func TestWorkflowRecordedValues(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q := uniq()
		var mu sync.Mutex
		var seen [][]interface{}
		var tries counter
		workOn(t, c, q, func(w *Worker) {
			w.Workflow("values", func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
				now, r, u := wf.Now(), wf.Random(), wf.UUID()
				_, err := wf.Step("flaky", func() (interface{}, error) {
					tries.add(wf.RunID())
					return nil, errors.New("down")
				}, StepOptions{MaxAttempts: 2, Backoff: 10 * time.Millisecond})
				mu.Lock()
				seen = append(seen, []interface{}{now.Format(time.RFC3339Nano), r, u, err.Error()})
				mu.Unlock()
				wf.Sleep(100 * time.Millisecond)
				return []interface{}{now, r, u}, nil
			})
		})
		run := must(c.StartWorkflow(ctx, "values", nil, StartOptions{Queue: q}))
		done := result(t, c, run.ID, 30*time.Second)
		if done.State != "completed" || len(seen) != 2 || fmt.Sprint(seen[0]) != fmt.Sprint(seen[1]) || tries.get(run.ID) != 2 {
			t.Fatalf("%+v %v tries %d", done, seen, tries.get(run.ID))
		}
		if seen[0][3] != "step 'flaky' failed after 2 attempt(s): down" {
			t.Fatal(seen[0][3])
		}
		journal := must(c.WorkflowSteps(ctx, run.ID))
		if len(journal) != 5 || journal[3].State != "failed" || journal[3].Attempts != 2 || *journal[3].Error != "down" {
			t.Fatalf("%+v", journal)
		}
	})
}

// --- servers of the tests' own --------------------------------------------------------------

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// freshDatabase is the --database (and --schema) arguments of a new database of backend's,
// dropped when the test ends.
func freshDatabase(t *testing.T, backend string) []string {
	suffix := strings.TrimPrefix(uniq(), "go-")
	switch backend {
	case "sqlite":
		return []string{"--database", "sqlite://" + filepath.Join(t.TempDir(), "docket.db")}
	case "postgres":
		url := os.Getenv("DOCKET_TEST_PG_URL")
		schema := "dur_" + suffix
		t.Cleanup(func() {
			_ = exec.Command("psql", url, "-XAtqc", "DROP SCHEMA IF EXISTS "+schema+" CASCADE").Run()
		})
		return []string{"--database", url, "--schema", schema}
	case "mysql":
		u, err := neturl.Parse(os.Getenv("DOCKET_TEST_MYSQL_URL"))
		if err != nil {
			t.Fatal(err)
		}
		db := "t_" + suffix + suffix + "abcdefgh" // 32 hex digits
		t.Cleanup(func() {
			client := "mariadb"
			if _, err := exec.LookPath(client); err != nil {
				client = "mysql"
			}
			port := u.Port()
			if port == "" {
				port = "3306"
			}
			args := []string{"--protocol=tcp", "-h", u.Hostname(), "-P", port, "-u", u.User.Username()}
			if pw, ok := u.User.Password(); ok {
				args = append(args, "-p"+pw)
			}
			_ = exec.Command(client, append(args, "-e", "DROP DATABASE IF EXISTS `"+db+"`")...).Run()
		})
		u.Path = "/" + db
		return []string{"--database", u.String()}
	}
	t.Fatalf("unknown backend %s", backend)
	return nil
}

// serve is a `docket serve` of a test's own.
type serve struct {
	t    *testing.T
	args []string
	URL  string
	cmd  *exec.Cmd
}

func startServe(t *testing.T, node string, db []string) *serve {
	port := freePort(t)
	s := &serve{t: t, URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	s.args = append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--node", node,
		"--rescue-interval", "200ms", "--poll-interval", "100ms", "--grace", "5s"}, db...)
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *serve) start() {
	bin := os.Getenv("DOCKET_BIN")
	if bin == "" {
		s.t.Fatal("DOCKET_BIN is not set (run through clients/test.sh)")
	}
	s.cmd = exec.Command(bin, s.args...)
	logf, err := os.CreateTemp(s.t.TempDir(), "serve-*.log")
	if err != nil {
		s.t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	end := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(end) {
			out, _ := os.ReadFile(logf.Name())
			s.t.Fatalf("docket serve did not come up: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *serve) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

func eachBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	for backend := range servers(t) {
		backend := backend
		t.Run(backend, func(t *testing.T) { fn(t, backend) })
	}
}

// (b) a 2 s sleep across a restart of docket serve: stopped while the run sleeps, started again
// on the same database, the run finishes (each step once).
func TestWorkflowSleepAcrossServerRestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		ctx := context.Background()
		s := startServe(t, "dur-restart", freshDatabase(t, backend))
		c := must(NewClient(Options{Server: s.URL}))
		q := uniq()
		var ran counter
		workOn(t, c, q, func(w *Worker) {
			w.Workflow("nap", func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
				now := wf.Now()
				a, _ := wf.Step("a", func() (interface{}, error) { ran.add("a"); return now.Unix(), nil })
				wf.Sleep(2 * time.Second)
				_, _ = wf.Step("b", func() (interface{}, error) { ran.add("b"); return nil, nil })
				return a, nil
			})
		})
		run := must(c.StartWorkflow(ctx, "nap", nil, StartOptions{Queue: q}))
		waitFor(t, 30*time.Second, runState(t, c, run.ID, "sleeping"))
		slept := time.Now()
		s.stop()
		time.Sleep(500 * time.Millisecond)
		s.start()
		done := result(t, c, run.ID, 60*time.Second)
		if done.State != "completed" || ran.get("a") != 1 || ran.get("b") != 1 || time.Since(slept) < 1500*time.Millisecond {
			t.Fatalf("%+v %v (error %v; journal %+v)", done, ran.n, deref(done.Error), must(c.WorkflowSteps(ctx, run.ID)))
		}
	})
}

// (g) 1,000 workflows of 3 steps on two nodes (one database), a worker on each: every step
// runs exactly once, to success.
func TestWorkflowThousandOnTwoNodes(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		ctx := context.Background()
		db := freshDatabase(t, backend)
		nodes := []*serve{startServe(t, "dur-a", db), startServe(t, "dur-b", db)}
		var ran counter
		var byWorker [2]int64
		for i, n := range nodes {
			i := i
			c := must(NewClient(Options{Server: n.URL}))
			w := must(NewWorker(WorkerOptions{Client: c, WorkflowConcurrency: 32, Wait: time.Second, ReportInterval: -1, Logger: quiet}))
			w.Workflow("three", func(wf *WorkflowContext, input json.RawMessage) (interface{}, error) {
				sum := 0
				for _, name := range []string{"s1", "s2", "s3"} {
					name := name
					v, err := StepAs(wf, name, func() (int, error) {
						ran.add(wf.RunID() + "/" + name)
						atomic.AddInt64(&byWorker[i], 1)
						return len(name), nil
					})
					if err != nil {
						return nil, err
					}
					sum += v
				}
				return sum, nil
			})
			wctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(wctx) }()
			t.Cleanup(func() { cancel(); <-done })
		}
		c := must(NewClient(Options{Server: nodes[0].URL}))
		const n = 1000
		ids := make([]string, n)
		began := time.Now()
		var wg sync.WaitGroup
		for k := 0; k < 8; k++ {
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				for i := k; i < n; i += 8 {
					ids[i] = must(c.StartWorkflow(ctx, "three", i, StartOptions{ID: fmt.Sprintf("r-%04d", i)})).ID
				}
			}(k)
		}
		wg.Wait()
		t.Logf("%d runs started in %s", n, time.Since(began).Round(time.Millisecond))
		waitFor(t, 240*time.Second, func() bool { return ran.total() >= 3*n })
		t.Logf("their steps ran in %s", time.Since(began).Round(time.Millisecond))
		for _, id := range ids {
			r := result(t, c, id, 30*time.Second)
			if r.State != "completed" || !sameJSON(r.Result, "6") {
				t.Fatalf("%+v", r)
			}
		}
		time.Sleep(500 * time.Millisecond) // anything run twice would show now
		for _, id := range ids {
			for _, s := range []string{"s1", "s2", "s3"} {
				if k := ran.get(id + "/" + s); k != 1 {
					t.Fatalf("%s/%s ran %d times", id, s, k)
				}
			}
		}
		if ran.total() != 3*n || byWorker[0] == 0 || byWorker[1] == 0 {
			t.Fatalf("%d steps; by worker %v", ran.total(), byWorker)
		}
		runs := must(c.ListWorkflowRuns(ctx, WorkflowRunFilter{Workflow: "three", State: "completed", Limit: 10}))
		if len(runs) != 10 {
			t.Fatalf("listed %d", len(runs))
		}
	})
}

// TestHelperWorkflowWorker is a workflow worker in its own process for
// TestWorkflowWorkerKilledMidStep (run only by it): "five" runs 5 steps, each appending a line
// to <dir>/<run>.s<i>; step 3 blocks (printing "in step 3 <run>") until <dir>/resumed exists.
func TestHelperWorkflowWorker(t *testing.T) {
	if os.Getenv("DOCKET_HELPER_WF") == "" {
		t.Skip("run by TestWorkflowWorkerKilledMidStep")
	}
	dir := os.Getenv("DOCKET_HELPER_DIR")
	c := must(NewClient(Options{Server: os.Getenv("DOCKET_HELPER_SERVER")}))
	w := must(NewWorker(WorkerOptions{Client: c, WorkflowQueue: os.Getenv("DOCKET_HELPER_QUEUE"), Lease: 3 * time.Second,
		Wait: time.Second, ReportInterval: -1}))
	w.Workflow("five", func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
		total := 0
		for i := 1; i <= 5; i++ {
			i := i
			v, err := StepAs(wf, fmt.Sprintf("s%d", i), func() (int, error) {
				f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s.s%d", wf.RunID(), i)), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				if err != nil {
					return 0, err
				}
				_, _ = f.WriteString("ran\n")
				f.Close()
				if _, err := os.Stat(filepath.Join(dir, "resumed")); i == 3 && err != nil {
					fmt.Printf("in step 3 %s\n", wf.RunID())
					time.Sleep(time.Hour)
				}
				return i * 10, nil
			})
			if err != nil {
				return nil, err
			}
			total += v
		}
		return total, nil
	})
	ctx, stop := signalContext()
	defer stop()
	_ = w.Run(ctx)
}

func spawnWorkflowWorker(t *testing.T, server, queue, dir string) (*exec.Cmd, chan string) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorkflowWorker$", "-test.v")
	cmd.Env = append(os.Environ(), "DOCKET_HELPER_WF=1", "DOCKET_HELPER_SERVER="+server, "DOCKET_HELPER_QUEUE="+queue,
		"DOCKET_HELPER_DIR="+dir)
	out := must(cmd.StdoutPipe())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "in step 3 ") {
				lines <- strings.TrimPrefix(l, "in step 3 ")
			}
		}
	}()
	return cmd, lines
}

// (a) a worker process killed (SIGKILL) in the middle of step 3 of 5: another worker takes the
// runs over, steps 1 and 2 do not run again, and the runs finish with the same result.
func TestWorkflowWorkerKilledMidStep(t *testing.T) {
	eachServer(t, func(t *testing.T, c *Client) {
		ctx := context.Background()
		q, dir := uniq(), t.TempDir()
		runs := []*WorkflowRun{
			must(c.StartWorkflow(ctx, "five", nil, StartOptions{Queue: q})),
			must(c.StartWorkflow(ctx, "five", nil, StartOptions{Queue: q})),
		}
		first, started := spawnWorkflowWorker(t, c.server, q, dir)
		in := map[string]bool{}
		for len(in) < len(runs) {
			select {
			case id := <-started:
				in[id] = true
			case <-time.After(30 * time.Second):
				t.Fatalf("only %d runs reached step 3", len(in))
			}
		}
		_ = first.Process.Kill()
		_ = first.Wait()
		if err := os.WriteFile(filepath.Join(dir, "resumed"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		spawnWorkflowWorker(t, c.server, q, dir)
		for _, run := range runs {
			done := result(t, c, run.ID, 60*time.Second)
			if done.State != "completed" || !sameJSON(done.Result, "150") {
				t.Fatalf("%+v %s", done, done.Result)
			}
			for i, want := range []int{1, 1, 2, 1, 1} {
				data, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s.s%d", run.ID, i+1)))
				if got := strings.Count(string(data), "ran"); got != want {
					t.Fatalf("run %s: step %d ran %d times, want %d", run.ID, i+1, got, want)
				}
			}
			journal := must(c.WorkflowSteps(ctx, run.ID))
			if len(journal) != 5 {
				t.Fatalf("%+v", journal)
			}
			for i, e := range journal {
				if e.Kind != "step" || e.Name != fmt.Sprintf("s%d", i+1) || e.Attempts != 1 || !sameJSON(e.Output, fmt.Sprint((i+1)*10)) {
					t.Fatalf("entry %d: %+v", i, e)
				}
			}
			task := must(c.GetTask(ctx, done.TaskID))
			if task.Attempt != 2 || task.State != "completed" {
				t.Fatalf("the run's task: %+v", task)
			}
		}
	})
}

// The quickstart of docs/src/durable/go.md runs as written (on the SQLite server) and prints
// what its comment says.
func TestWorkflowQuickstartInDocs(t *testing.T) {
	server := servers(t)["sqlite"]
	doc := string(must(os.ReadFile("../../docs/src/durable/go.md")))
	quick := doc[strings.Index(doc, "## Quickstart"):]
	start := strings.Index(quick, "```go\n") + len("```go\n")
	code := quick[start : start+strings.Index(quick[start:], "```")]
	dir := t.TempDir()
	here := must(filepath.Abs("."))
	mod := "module example.com/quickstart\n\ngo 1.19\n\nrequire github.com/docket/docket/clients/go v0.0.0\n\n" +
		"replace github.com/docket/docket/clients/go => " + here + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DOCKET_SERVER="+server, "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	want := `completed {"charge":"ch_42_1999","status":"approved by Ada"}`
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Fatalf("go run: %v\n%s\nwant %s", err, out, want)
	}
}
