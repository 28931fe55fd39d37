package main

import (
	"context"
	"fmt"
	"log"

	docket "github.com/docket/docket/clients/go"
)

func main() {
	ctx, stop := context.WithCancel(context.Background()) // or signal.NotifyContext for SIGTERM
	client, err := docket.NewClient(docket.Options{})     // $DOCKET_SERVER, else http://127.0.0.1:7070
	if err != nil {
		log.Fatal(err)
	}
	task, err := client.Enqueue(ctx, docket.NewTask{Kind: "greet", Payload: map[string]string{"name": "Ada"}, Queue: "quickstart"})
	if err != nil {
		log.Fatal(err) // docket not running, for one
	}
	worker, _ := docket.NewWorker(docket.WorkerOptions{Client: client, Queue: "quickstart"})
	worker.Register("greet", func(_ context.Context, job *docket.Job) (interface{}, error) {
		var p struct{ Name string }
		_ = job.Payload(&p)
		stop() // one task is enough for a quickstart: finish it, then stop
		return "hello, " + p.Name, nil
	})
	_ = worker.Run(ctx) // until ctx ends
	done, err := client.GetTask(context.Background(), task.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(done.Result)) // "hello, Ada"
}
