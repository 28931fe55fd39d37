package docket

// The replay logic of durable functions against a fake server (no docket needed).

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"testing"
	"time"
)

type fakeFinish struct {
	steps  []entryOut
	result json.RawMessage
	err    *string
}

type fakeWF struct {
	resume   *resumeAnswer
	records  [][]entryOut
	suspends []waitOut
	suspSent [][]entryOut
	answer   func(w waitOut) *suspendAnswer
	finished []fakeFinish
	recErr   error
}

func (f *fakeWF) wfResume(ctx context.Context, id, lease string) (*resumeAnswer, error) {
	return f.resume, nil
}

func (f *fakeWF) wfRecord(ctx context.Context, id, lease string, steps []entryOut) error {
	if f.recErr != nil {
		return f.recErr
	}
	f.records = append(f.records, steps)
	return nil
}

func (f *fakeWF) wfSuspend(ctx context.Context, id, lease string, steps []entryOut, w waitOut) (*suspendAnswer, error) {
	f.suspends = append(f.suspends, w)
	f.suspSent = append(f.suspSent, steps)
	if f.answer != nil {
		return f.answer(w), nil
	}
	return &suspendAnswer{Outcome: "suspended"}, nil
}

func (f *fakeWF) wfFinish(ctx context.Context, id, lease string, steps []entryOut, result json.RawMessage, errMsg *string) error {
	f.finished = append(f.finished, fakeFinish{steps, result, errMsg})
	return nil
}

func fakeRun(srv *fakeWF, fn WorkflowFunc, fresh bool) *WorkflowContext {
	wf := newWorkflowContext(context.Background(), srv, "checkout", "r1", "lease", 1, json.RawMessage(`{"n":1}`),
		log.New(io.Discard, "", 0))
	wf.sleep = func(context.Context, time.Duration) bool { return true }
	wf.drive(fn, fresh)
	return wf
}

func str(s string) *string { return &s }

func TestUnitWorkflowFreshThenReplay(t *testing.T) {
	ran := map[string]int{}
	var seen []interface{}
	fn := func(wf *WorkflowContext, input json.RawMessage) (interface{}, error) {
		now := wf.Now()
		a, err := StepAs(wf, "a", func() (int, error) { ran["a"]++; return 41, nil })
		if err != nil {
			return nil, err
		}
		p := wf.Patched("p")
		r := wf.Random()
		seen = append(seen, now.Format(time.RFC3339Nano), a, p, r)
		wf.Sleep(time.Minute)
		b, _ := wf.Step("b", func() (interface{}, error) { ran["b"]++; return "bee", nil })
		return map[string]interface{}{"a": a + 1, "b": b, "input": input}, nil
	}
	srv := &fakeWF{}
	fakeRun(srv, fn, true)
	if len(srv.finished) != 0 || len(srv.suspends) != 1 || ran["a"] != 1 || ran["b"] != 0 {
		t.Fatalf("fresh: %+v %v", srv, ran)
	}
	// now (0) went with step a (1); patch (2) and random (3) with the suspend at 4.
	if r := srv.records[0]; len(r) != 2 || r[0].Kind != "now" || r[1].Kind != "step" || r[1].Seq != 1 || string(r[1].Output) != "41" || r[1].Attempts != 1 {
		t.Fatalf("records %+v", srv.records)
	}
	w := srv.suspends[0]
	if w.Seq != 4 || w.Kind != "sleep" || w.Until == nil || time.Until(*w.Until) < 50*time.Second {
		t.Fatalf("wait %+v", w)
	}
	if s := srv.suspSent[0]; len(s) != 2 || s[0].Kind != "patch" || s[0].Name != "p" || string(s[0].Output) != "null" || s[1].Kind != "random" {
		t.Fatalf("suspend steps %+v", s)
	}
	// The journal as the server would answer it, the sleep over.
	var journal []JournalEntry
	for _, e := range append(append([]entryOut{}, srv.records[0]...), srv.suspSent[0]...) {
		journal = append(journal, JournalEntry{Seq: e.Seq, Kind: e.Kind, Name: e.Name, State: "completed", Output: e.Output})
	}
	past := time.Now().Add(-time.Second)
	journal = append(journal, JournalEntry{Seq: 4, Kind: "sleep", Name: "sleep", State: "waiting", WakeAt: &past})
	srv2 := &fakeWF{resume: &resumeAnswer{Run: WorkflowRun{State: "sleeping"}, Steps: journal, Now: time.Now()}}
	fakeRun(srv2, fn, false)
	if ran["a"] != 1 || ran["b"] != 1 || len(srv2.suspends) != 0 || len(srv2.finished) != 1 {
		t.Fatalf("replay: %+v %v", srv2, ran)
	}
	f := srv2.finished[0]
	if f.err != nil || string(f.result) != `{"a":42,"b":"bee","input":{"n":1}}` {
		t.Fatalf("finish %s %v", f.result, f.err)
	}
	if seen[0] != seen[4] || seen[1] != seen[5] || seen[2] != true || seen[6] != true || seen[3] != seen[7] {
		t.Fatalf("replayed values differ: %v", seen)
	}
	if r := srv2.records[0]; len(r) != 1 || r[0].Seq != 5 || r[0].Name != "b" {
		t.Fatalf("replay records %+v", srv2.records)
	}
}

func TestUnitWorkflowNonDeterminism(t *testing.T) {
	ran := 0
	fn := func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
		wf.Step("reserve", func() (interface{}, error) { ran++; return 1, nil })
		wf.Step("refund", func() (interface{}, error) { ran++; return 1, nil })
		return "done", nil
	}
	srv := &fakeWF{resume: &resumeAnswer{Run: WorkflowRun{State: "running"}, Steps: []JournalEntry{
		{Seq: 0, Kind: "step", Name: "reserve", State: "completed", Output: json.RawMessage("1")},
		{Seq: 1, Kind: "step", Name: "charge", State: "completed", Output: json.RawMessage("2")},
	}}}
	fakeRun(srv, fn, false)
	want := `non-determinism: workflow checkout run r1: journal entry 1 is step "charge" but the code asked for step "refund"`
	if ran != 0 || len(srv.finished) != 1 || srv.finished[0].err == nil || *srv.finished[0].err != want {
		t.Fatalf("%d %+v", ran, srv.finished)
	}
	// The server's refusal (a journal entry the client had not read) fails the run too.
	srv = &fakeWF{recErr: &Error{Status: 409, Code: "nondeterministic", Message: `non-determinism: workflow checkout run r1: journal entry 0 is sleep "sleep" but the code asked for step "reserve"`}}
	fakeRun(srv, fn, true)
	if len(srv.finished) != 1 || *srv.finished[0].err != `non-determinism: workflow checkout run r1: journal entry 0 is sleep "sleep" but the code asked for step "reserve"` {
		t.Fatalf("%+v", srv.finished)
	}
	// A lease refusal stops quietly: no finish.
	srv = &fakeWF{recErr: &Error{Status: 409, Code: "lease_lost"}}
	fakeRun(srv, fn, true)
	if len(srv.finished) != 0 {
		t.Fatalf("%+v", srv.finished)
	}
}

func TestUnitWorkflowPatchedOldRun(t *testing.T) {
	fn := func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
		if wf.Patched("v2") {
			return wf.Step("new", func() (interface{}, error) { return "new", nil })
		}
		return wf.Step("old", func() (interface{}, error) { return "old-again", nil })
	}
	srv := &fakeWF{resume: &resumeAnswer{Run: WorkflowRun{State: "running"}, Steps: []JournalEntry{
		{Seq: 0, Kind: "step", Name: "old", State: "completed", Output: json.RawMessage(`"old"`)}}}}
	fakeRun(srv, fn, false)
	if len(srv.records) != 0 || string(srv.finished[0].result) != `"old"` {
		t.Fatalf("%+v", srv)
	}
	srv = &fakeWF{}
	fakeRun(srv, fn, true)
	if r := srv.records[0]; len(r) != 2 || r[0].Kind != "patch" || r[0].Seq != 0 || r[1].Seq != 1 || string(srv.finished[0].result) != `"new"` {
		t.Fatalf("%+v", srv)
	}
}

func TestUnitWorkflowStepRetries(t *testing.T) {
	calls := 0
	fn := func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
		v, err := wf.Step("flaky", func() (interface{}, error) {
			calls++
			if calls < 3 {
				return nil, errors.New("not yet")
			}
			return calls, nil
		})
		if err != nil {
			return nil, err
		}
		_, err = wf.Step("bad", func() (interface{}, error) { return nil, Permanent(errors.New("no card")) })
		var sf *StepFailed
		if !errors.As(err, &sf) || sf.Attempts != 1 || sf.Message != "no card" {
			return nil, errors.New("want StepFailed")
		}
		_, err = wf.Step("panics", func() (interface{}, error) { panic("boom") }, StepOptions{MaxAttempts: 2})
		return string(v), err
	}
	srv := &fakeWF{}
	fakeRun(srv, fn, true)
	if len(srv.records) != 3 || srv.records[0][0].Attempts != 3 || string(srv.records[0][0].Output) != "3" ||
		*srv.records[1][0].Error != "no card" || srv.records[2][0].Attempts != 2 {
		t.Fatalf("%+v", srv.records)
	}
	if e := srv.finished[0].err; e == nil || *e != "step 'panics' failed after 2 attempt(s): panic: boom" {
		t.Fatalf("%v", e)
	}
}

func TestUnitWorkflowWaits(t *testing.T) {
	fn := func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
		p, ok := wf.WaitForEvent("approved", time.Minute)
		_, ok2 := wf.WaitForEvent("late", time.Second)
		child := wf.StartChild("ship", map[string]int{"n": 1})
		r, err := child.Result()
		other := wf.StartChild("ship", 2, ChildOptions{ID: "fixed"})
		_, err2 := other.Result()
		return []interface{}{p, ok, ok2, child.ID, r, err == nil, err2.Error()}, nil
	}
	srv := &fakeWF{answer: func(w waitOut) *suspendAnswer {
		switch {
		case w.Name == "approved":
			return &suspendAnswer{Outcome: "event", Payload: json.RawMessage(`{"by":"ann"}`)}
		case w.Name == "late":
			return &suspendAnswer{Outcome: "timed_out"}
		case w.ChildID == "r1:2":
			return &suspendAnswer{Outcome: "event", Payload: json.RawMessage(`{"state":"completed","result":7,"error":null}`)}
		}
		return &suspendAnswer{Outcome: "event", Payload: json.RawMessage(`{"state":"failed","result":null,"error":"out of stock"}`)}
	}}
	fakeRun(srv, fn, true)
	want := `[{"by":"ann"},true,false,"r1:2",7,true,"child workflow ship run fixed failed: out of stock"]`
	if len(srv.finished) != 1 || string(srv.finished[0].result) != want {
		t.Fatalf("%s", srv.finished[0].result)
	}
	if srv.suspends[0].Timeout != "60000ms" || srv.suspends[2].Seq != 3 || srv.records[1][0].Child.ID != "fixed" {
		t.Fatalf("%+v %+v", srv.suspends, srv.records)
	}
}

// A durable call inside a step's function fails the run (a replay would not make it).
func TestUnitWorkflowDurableCallInsideAStep(t *testing.T) {
	fn := func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
		return wf.Step("a", func() (interface{}, error) { return wf.Now().Unix(), nil })
	}
	srv := &fakeWF{}
	fakeRun(srv, fn, true)
	want := `workflow checkout run r1: now "now" called inside step "a": durable calls belong to the workflow function, not to a step's`
	if len(srv.records) != 0 || len(srv.finished) != 1 || srv.finished[0].err == nil || *srv.finished[0].err != want {
		t.Fatalf("%+v", srv)
	}
}

// A refusal that is not about the lease (a child's id taken: 409 conflict) fails the run
// with docket's message instead of stopping quietly (which would replay into it again).
func TestUnitWorkflowOtherRefusalsFailTheRun(t *testing.T) {
	fn := func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
		wf.StartChild("ship", nil, ChildOptions{ID: "taken"})
		return nil, nil
	}
	for _, code := range []string{"lease_lost", "cancelled", "timed_out"} {
		srv := &fakeWF{recErr: &Error{Status: 409, Code: code}}
		fakeRun(srv, fn, true)
		if len(srv.finished) != 0 {
			t.Fatalf("%s: %+v", code, srv.finished)
		}
	}
	srv := &fakeWF{recErr: &Error{Status: 409, Code: "conflict", Message: "workflow run taken exists and is not a child ship of r1"}}
	fakeRun(srv, fn, true)
	if len(srv.finished) != 1 || *srv.finished[0].err != "docket refused the journal's call: conflict: workflow run taken exists and is not a child ship of r1 (HTTP 409)" {
		t.Fatalf("%+v", srv.finished)
	}
}

func TestUnitWorkflowReturnsWithJournalLeft(t *testing.T) {
	fn := func(wf *WorkflowContext, _ json.RawMessage) (interface{}, error) {
		return wf.Step("reserve", func() (interface{}, error) { return 1, nil })
	}
	srv := &fakeWF{resume: &resumeAnswer{Run: WorkflowRun{State: "running"}, Steps: []JournalEntry{
		{Seq: 0, Kind: "step", Name: "reserve", State: "completed", Output: json.RawMessage("1")},
		{Seq: 1, Kind: "step", Name: "charge", State: "completed", Output: json.RawMessage("2")},
	}}}
	fakeRun(srv, fn, false)
	want := `non-determinism: workflow checkout run r1: the code returned after 1 call(s) but the journal has 2; entry 1 is step "charge"`
	if len(srv.finished) != 1 || srv.finished[0].err == nil || *srv.finished[0].err != want || srv.finished[0].result != nil {
		t.Fatalf("%+v", srv.finished)
	}
}
