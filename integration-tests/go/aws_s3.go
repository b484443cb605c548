// AWS's Go SDK v2 S3 client, path-style against ENDPOINT. Credentials come from the SDK's
// default chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN), the region
// from AWS_REGION (eu-west-1 otherwise), trust from AWS_CA_BUNDLE, and the proxy from
// HTTPS_PROXY (net/http's ProxyFromEnvironment).
//
// usage: aws_s3 ENDPOINT BUCKET
// Lists buckets, puts and gets go.txt, then a 6 MiB go-big.bin, printing "go buckets: ...",
// "go get: ..." and "go big intact".
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "go failed: %s: %v\n", what, err)
	os.Exit(1)
}

func main() {
	endpoint, bucket := os.Args[1], os.Args[2]
	ctx := context.Background()
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "eu-west-1"
	}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
	if err != nil {
		fail("config", err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = true
		o.EndpointResolver = s3.EndpointResolverFromURL(endpoint)
	})

	listed, err := client.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		fail("ListBuckets", err)
	}
	names := []string{}
	for _, b := range listed.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	fmt.Printf("go buckets: %s\n", strings.Join(names, ","))

	put := func(key string, body []byte) {
		_, err := client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(bucket),
			Key:    aws.String(key),
			Body:   bytes.NewReader(body),
		})
		if err != nil {
			fail("PutObject "+key, err)
		}
	}
	get := func(key string) []byte {
		out, err := client.GetObject(ctx, &s3.GetObjectInput{
			Bucket: aws.String(bucket),
			Key:    aws.String(key),
		})
		if err != nil {
			fail("GetObject "+key, err)
		}
		defer out.Body.Close()
		data, err := io.ReadAll(out.Body)
		if err != nil {
			fail("reading "+key, err)
		}
		return data
	}

	put("go.txt", []byte("hello from go\n"))
	fmt.Printf("go get: %s\n", strings.TrimSpace(string(get("go.txt"))))

	big := make([]byte, 6*1024*1024)
	if _, err := rand.Read(big); err != nil {
		fail("random", err)
	}
	put("go-big.bin", big)
	if back := get("go-big.bin"); !bytes.Equal(back, big) {
		fail("go-big.bin", fmt.Errorf("came back as %d bytes that differ", len(back)))
	}
	fmt.Println("go big intact")
}
