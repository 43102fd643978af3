package retry_test

import (
	"context"
	"fmt"
	"time"

	"github.com/steadyhq/retry"
)

// A replica that hangs: after 10 ms a hedge goes to another, whose answer
// is returned; the hung attempt is canceled.
func ExampleHedged() {
	r := retry.New(retry.WithHedge(retry.Hedge{
		Delay: 10 * time.Millisecond,
		OnEvent: func(ev retry.Event) {
			fmt.Println(ev.Type, "attempt", ev.Attempt)
		},
	}))
	replica, err := retry.Hedged(context.Background(), func(ctx context.Context) (string, error) {
		if retry.AttemptFrom(ctx) == 1 {
			<-ctx.Done() // hung until canceled
			return "", ctx.Err()
		}
		return "replica 2", nil
	}, r)
	st := r.Stats()
	fmt.Println(replica, err, st.Attempts, st.Hedges, st.HedgeWins)
	// Output:
	// hedge.started attempt 2
	// hedge.won attempt 2
	// replica 2 <nil> 2 1 1
}
