package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Pressure is a steady write load that is not measured: it overwrites random preloaded keys at a fixed
// rate, so the log grows while a member is down and the member has to catch up when it comes back.
type Pressure struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ok     atomic.Int64
	failed atomic.Int64
}

// pressureWorkers share the rate; several, so one slow put does not stall the whole load.
const pressureWorkers = 6

// StartPressure writes rate puts/s of valueSize bytes to keys prefix%08d (0 <= i < keys) until Stop.
func StartPressure(cli *clientv3.Client, prefix string, keys, valueSize, rate int) *Pressure {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pressure{cancel: cancel}
	value := string(make([]byte, valueSize))
	every := time.Duration(float64(time.Second) * pressureWorkers / float64(rate))
	for w := range pressureWorkers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				cctx, c := context.WithTimeout(ctx, 2*time.Second)
				_, err := cli.Put(cctx, fmt.Sprintf("%s%08d", prefix, r.IntN(keys)), value)
				c()
				if err != nil {
					p.failed.Add(1)
				} else {
					p.ok.Add(1)
				}
			}
		}()
	}
	return p
}

// Stop ends the load and returns how many puts succeeded and failed.
func (p *Pressure) Stop() (ok, failed int64) {
	p.cancel()
	p.wg.Wait()
	return p.ok.Load(), p.failed.Load()
}

// Counts returns the puts so far.
func (p *Pressure) Counts() (ok, failed int64) { return p.ok.Load(), p.failed.Load() }
