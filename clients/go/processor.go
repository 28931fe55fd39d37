package docket

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ProcessHandler answers one step of a durable process (init, call, repair or timeout).
// Return a *Result (nil: no change) or an error: a *ProcessorFailure answers {"error": its
// value}, any other error {"error": its message}; the process then goes to error (init/call)
// or its timer is retried per the namespace's retry policy.
type ProcessHandler func(req *ProcessorRequest) (*Result, error)

// Result is a processor's answer (schema ProcessorResult). AuxState and Metadata nil: unchanged.
// Action: Timer, TimerAt, UnsetTimer, or nil to keep the timers.
type Result struct {
	Events   []NewEvent
	AuxState interface{}
	Metadata interface{}
	Response interface{}
	Action   interface{}
}

// Timer wakes the process (a timeout step) after d; remove deletes it then instead.
func Timer(d time.Duration, remove bool) interface{} {
	a := map[string]interface{}{"timeout": Duration(d)}
	if remove {
		a["remove"] = true
	}
	return a
}

// TimerAt wakes the process at t.
func TimerAt(t time.Time, remove bool) interface{} {
	a := map[string]interface{}{"set_timer": t.UTC().Format(time.RFC3339Nano)}
	if remove {
		a["remove"] = true
	}
	return a
}

// UnsetTimer cancels the process's timers.
const UnsetTimer = "unset_timer"

// ProcessorFailure answers {"error": Value}.
type ProcessorFailure struct{ Value interface{} }

func (f *ProcessorFailure) Error() string { return fmt.Sprint(f.Value) }

// Processor answers docket's processor protocol (docs/src/concepts/processes.md): register
// handlers with On, then serve it as an http.Handler at the namespace's processor URL.
type Processor struct{ handlers map[string]ProcessHandler }

// NewProcessor makes an empty processor.
func NewProcessor() *Processor { return &Processor{handlers: map[string]ProcessHandler{}} }

// On registers fn for taskType: "init", "call", "repair" or "timeout".
func (p *Processor) On(taskType string, fn ProcessHandler) *Processor {
	p.handlers[taskType] = fn
	return p
}

// Events returns the payloads of the history docket sent, decoded one by one into new values
// of the slice's element type: var events []map[string]any; req.Events(&events).
func (r *ProcessorRequest) Events(out interface{}) error {
	payloads := make([]json.RawMessage, len(r.Process.History))
	for i, e := range r.Process.History {
		payloads[i] = e.Payload
	}
	b, _ := json.Marshal(payloads)
	return json.Unmarshal(b, out)
}

// Handle turns one request body into the answer to send.
func (p *Processor) Handle(body []byte) map[string]interface{} {
	var req ProcessorRequest
	if err := json.Unmarshal(body, &req); err != nil || req.TaskType == "" {
		return map[string]interface{}{"error": fmt.Sprintf("not a processor request: %v", err)}
	}
	fn := p.handlers[req.TaskType]
	if fn == nil {
		return map[string]interface{}{"error": "no " + req.TaskType + " handler"}
	}
	res, err := fn(&req)
	if err != nil {
		if f, ok := err.(*ProcessorFailure); ok {
			return map[string]interface{}{"error": f.Value}
		}
		return map[string]interface{}{"error": err.Error()}
	}
	out := map[string]interface{}{"events": []NewEvent{}}
	if res == nil {
		return out
	}
	if res.Events != nil {
		out["events"] = res.Events
	}
	out["response"] = res.Response
	if res.AuxState != nil {
		out["aux_state"] = res.AuxState
	}
	if res.Metadata != nil {
		out["metadata"] = res.Metadata
	}
	if res.Action != nil {
		out["action"] = res.Action
	}
	return out
}

// ServeHTTP answers docket's POSTs (always 200 with JSON; errors are in the body).
func (p *Processor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var answer map[string]interface{}
	if err != nil {
		answer = map[string]interface{}{"error": err.Error()}
	} else {
		answer = p.Handle(body)
	}
	data, err := json.Marshal(answer)
	if err != nil {
		data, _ = json.Marshal(map[string]interface{}{"error": err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}
