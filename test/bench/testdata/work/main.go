// Command work does a fixed amount of work for each number it reads on
// stdin, then answers "done": what the instruction counter's test counts.
package main

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"os"
	"strconv"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	for in.Scan() {
		n, err := strconv.Atoi(in.Text())
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		sum := sha256.Sum256(nil)
		for range n {
			sum = sha256.Sum256(sum[:])
		}
		fmt.Println("done", sum[0])
	}
}
