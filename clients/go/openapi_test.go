package docket

import (
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// Every hand-written type names only fields its schema in openapi.json has, and has every
// field the schema requires — so a change to the document that these types miss fails here.
func TestTypesMatchTheOpenAPIDocument(t *testing.T) {
	raw, err := os.ReadFile("../../crates/docket-server/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	types := map[string]interface{}{
		"Task": Task{}, "Lease": Lease{}, "TaskError": TaskError{}, "TaskRun": TaskRun{}, "NewTask": NewTask{},
		"Backoff": Backoff{}, "TaskPage": TaskPage{}, "TaskPatch": TaskPatch{}, "ClaimRequest": ClaimRequest{},
		"CompleteRequest": CompleteRequest{}, "FailRequest": FailRequest{}, "HeartbeatRequest": HeartbeatRequest{},
		"ItemOutcome": ItemOutcome{}, "QueueSettings": QueueSettings{}, "QueueStats": QueueStats{},
		"ScheduleSpec": ScheduleSpec{}, "Event": Event{}, "Process": Process{}, "ProcessView": ProcessView{},
		"Notification": Notification{}, "WorkerReport": WorkerReport{}, "WorkerView": WorkerView{},
		"TokenCreateRequest": TokenCreateRequest{}, "TokenView": TokenView{}, "TokenCreated": TokenCreated{},
		"ProcessorRequest": ProcessorRequest{}, "ProcessorProcess": ProcessorProcess{}, "NewEvent": NewEvent{},
		"NewBatch": NewBatch{}, "Callbacks": Callbacks{}, "Batch": Batch{}, "BatchCreated": BatchCreated{},
		"NewWorkflow": NewWorkflow{}, "Workflow": Workflow{}, "WorkflowNode": WorkflowNode{},
		"WorkflowCreated": WorkflowCreated{}, "BulkFilter": BulkFilter{}, "BulkJob": BulkJob{},
		"BulkCount": BulkCount{}, "ReleaseItem": ReleaseItem{}, "ClaimReleased": ClaimReleased{},
		"ClaimResponse": ClaimResponse{}, "LeanTask": LeanTask{}, "Debounce": Debounce{},
		"DeadLetterOf": DeadLetterOf{}, "Prefer": Prefer{},
		// Durable functions (workflow.go).
		"WorkflowRun": WorkflowRun{}, "Entry": JournalEntry{}, "EventSent": EventSent{}, "NewEntry": entryOut{},
		"ChildSpec": childOut{}, "Wait": waitOut{}, "Suspended": suspendAnswer{}, "Resumed": resumeAnswer{},
	}
	for name, v := range types {
		schema, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("%s: no such schema in openapi.json", name)
			continue
		}
		fields := map[string]bool{}
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			tag := strings.Split(rt.Field(i).Tag.Get("json"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			fields[tag] = true
			if _, ok := schema.Properties[tag]; !ok {
				t.Errorf("%s.%s: field %q is not in the schema", name, rt.Field(i).Name, tag)
			}
		}
		for _, req := range schema.Required {
			if !fields[req] {
				t.Errorf("%s: required field %q is missing", name, req)
			}
		}
		// Fields the schema has and the type leaves out are listed, so a reader sees them.
		var missing []string
		for p := range schema.Properties {
			if !fields[p] {
				missing = append(missing, p)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s: the schema's fields %v are not in the type", name, missing)
		}
	}
}
