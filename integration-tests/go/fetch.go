// Go's net/http client with no proxy at all (Transport.Proxy nil: HTTPS_PROXY is ignored)
// and the system trust store: what a Go program that never heard of sluice does.
//
// usage: fetch PORT HOST...
// GETs https://HOST:PORT/go for each HOST with `Authorization: Bearer $API_TOKEN`, printing
// "HOST STATUS SLUICE-ERROR" ("none" when the answer has no sluice-error header).
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	port := os.Args[1]
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	for _, host := range os.Args[2:] {
		request, err := http.NewRequest("GET", "https://"+host+":"+port+"/go", nil)
		if err != nil {
			fmt.Fprintf(os.Stderr, "go fetch: %v\n", err)
			os.Exit(1)
		}
		request.Header.Set("Authorization", "Bearer "+os.Getenv("API_TOKEN"))
		response, err := client.Do(request)
		if err != nil {
			fmt.Fprintf(os.Stderr, "go fetch %s: %v\n", host, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, response.Body)
		response.Body.Close()
		code := response.Header.Get("sluice-error")
		if code == "" {
			code = "none"
		}
		fmt.Printf("%s %d %s\n", host, response.StatusCode, code)
	}
}
