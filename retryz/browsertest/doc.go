// Package browsertest drives the live page of package retryz in headless
// Chromium: a program with a flaky dependency runs, and the page, opened
// once, shows its breaker opening and closing as it happens. It is a
// module of its own so that its browser driver (chromedp) stays out of
// the library's dependencies; it has tests only.
package browsertest
