// Command retry shows what a retry policy does before it ships.
package main

import (
	"fmt"

	"github.com/steadyhq/retry"
)

func main() { fmt.Println(retry.DefaultPolicy().Delay(1)) }
