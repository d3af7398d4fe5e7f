package blob

import "os"

// S3Config is how to reach an S3-compatible object store. FromEnv fills
// what flags left empty from the standard AWS environment variables.
type S3Config struct {
	// Endpoint is a URL (http://host:port, https://host) or host:port
	// (HTTPS). Empty is AWS's regional endpoint.
	Endpoint string
	Region   string
	// AccessKey and SecretKey are static credentials; empty uses none
	// (anonymous access), SessionToken goes with temporary ones.
	AccessKey, SecretKey, SessionToken string
	// PathStyle: "auto" (path-style for IP addresses, localhost and
	// anything but AWS and Google, virtual-hosted there), "path" or
	// "virtual".
	PathStyle string
	// PartSize is the part size of multipart uploads, which objects of
	// that size or larger use; an upload holds at most uploadThreads
	// parts in memory. 0 is 16 MiB.
	PartSize uint64
	// MaxRetries bounds the client's retries of a request that failed
	// transiently (5xx, 429, timeouts, connection resets), with
	// exponential backoff and jitter; 0 is 5.
	MaxRetries int
	// AllowUnconditionalCreate accepts a server that ignores
	// If-None-Match on PUT: create-once writes (a checkpoint's _metadata)
	// then fall back to create-then-verify, which two writers racing for
	// one object can both pass. Off, such a server is refused.
	AllowUnconditionalCreate bool
}

// FromEnv fills empty fields from AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3),
// AWS_REGION (or AWS_DEFAULT_REGION), AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
func (c S3Config) FromEnv() S3Config {
	set := func(dst *string, keys ...string) {
		for _, k := range keys {
			if *dst == "" {
				*dst = os.Getenv(k)
			}
		}
	}
	set(&c.Endpoint, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	set(&c.Region, "AWS_REGION", "AWS_DEFAULT_REGION")
	set(&c.AccessKey, "AWS_ACCESS_KEY_ID")
	set(&c.SecretKey, "AWS_SECRET_ACCESS_KEY")
	set(&c.SessionToken, "AWS_SESSION_TOKEN")
	return c
}
