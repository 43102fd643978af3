// Package retryablehttp is under construction.
package retryablehttp
