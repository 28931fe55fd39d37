// bench worker: work SERVER N CONC PROFILE | latency SERVER RATE SECS CONC
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	docket "github.com/docket/docket/clients/go"
)

func main() {
	mode, server := os.Args[1], os.Args[2]
	a, _ := strconv.Atoi(os.Args[3])
	b, _ := strconv.Atoi(os.Args[4])
	c, err := docket.NewClient(docket.Options{Server: server})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// DOCKET_BENCH_CPUPROFILE=FILE: a CPU profile of the run (go tool pprof -top FILE).
	if f := os.Getenv("DOCKET_BENCH_CPUPROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(out); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if mode == "work" {
		n, conc := int64(a), b
		// "prefetch": claim up to 1000 ahead of free handlers (the HTTP path bench's claim batch);
		// "default": the worker's default (automatic prefetch, Prefetch 0).
		// "deep": 10 claims of up to 1000 in flight, 10,000 held ahead — what the HTTP work path
		// (c10-http: 10 loops claiming 1000) keeps in flight.
		prefetch, claims := 0, 0
		switch os.Args[5] {
		case "prefetch":
			prefetch = 1000
		case "deep":
			prefetch, claims = 10000, 10
		}
		t0 := time.Now()
		w, _ := docket.NewWorker(docket.WorkerOptions{Client: c, Queue: "bench", Concurrency: conc, Prefetch: prefetch, Claims: claims, Wait: waitFor(), ReportInterval: -1, Logger: log.New(io.Discard, "", 0)})
		w.Register("noop", func(ctx context.Context, job *docket.Job) (interface{}, error) { return nil, nil })
		done := make(chan struct{})
		go func() { _ = w.Run(ctx); close(done) }()
		for {
			if completed(w) >= n {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		secs := time.Since(t0).Seconds()
		cancel()
		<-done
		fmt.Printf("RESULT seconds=%.6f\n", secs)
		return
	}
	rate, secs := a, b
	conc, _ := strconv.Atoi(os.Args[5])
	total := rate * secs
	var mu sync.Mutex
	started := map[int]time.Time{}
	sent := map[int][2]time.Time{}
	w, _ := docket.NewWorker(docket.WorkerOptions{Client: c, Queue: "lat", Concurrency: conc, Wait: 10 * time.Second, ReportInterval: -1})
	w.Register("lat", func(ctx context.Context, job *docket.Job) (interface{}, error) {
		var p struct {
			ID int `json:"id"`
		}
		_ = job.Payload(&p)
		mu.Lock()
		started[p.ID] = time.Now()
		mu.Unlock()
		return nil, nil
	})
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	for i := 0; i < total; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		t0 := time.Now()
		if _, err := c.Enqueue(ctx, docket.NewTask{Kind: "lat", Queue: "lat", Payload: map[string]interface{}{"id": i, "t": time.Now().UnixMilli()}}); err != nil {
			log.Fatal(err)
		}
		mu.Lock()
		sent[i] = [2]time.Time{t0, time.Now()}
		mu.Unlock()
	}
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		mu.Lock()
		n := len(started)
		mu.Unlock()
		if n >= total {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	out := os.Getenv("LAT_OUT")
	if out == "" {
		out = "lat.txt"
	}
	f, err := os.Create(out)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for i := 0; i < total; i++ {
		s, ok1 := sent[i]
		h, ok2 := started[i]
		if ok1 && ok2 {
			fmt.Fprintf(f, "%.3f %.3f\n", ms(h.Sub(s[1])), ms(h.Sub(s[0])))
		} else {
			fmt.Fprintln(f, "nan nan")
		}
	}
}

func completed(w *docket.Worker) int64 { return w.CompletedCount() }

func waitFor() time.Duration {
	if v := os.Getenv("BENCH_WAIT"); v != "" {
		d, _ := time.ParseDuration(v)
		return d
	}
	return time.Second
}
