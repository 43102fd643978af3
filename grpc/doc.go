// Package grpc runs the RPCs of a grpc-go client through a retry.Retrier:
// UnaryClientInterceptor and StreamClientInterceptor drive the same engine
// as retry.Do and retry.Transport, with its policy, breaker, rate limiter and
// retry budget, and follow the retry semantics of gRFC A6 (what grpc-go does
// for a service config's retryPolicy).
//
//	r := retry.New(retry.WithPolicy(retry.Policy{MaxAttempts: 4}))
//	cc, err := grpc.NewClient(target,
//		grpc.WithTransportCredentials(insecure.NewCredentials()),
//		grpc.WithUnaryInterceptor(retrygrpc.UnaryClientInterceptor(r)),
//		grpc.WithStreamInterceptor(retrygrpc.StreamClientInterceptor(r)),
//	)
//
// # Status codes
//
// The status of a failed attempt becomes an error of type "grpc." and the
// code's name in snake case (Type): "grpc.unavailable",
// "grpc.resource_exhausted", "grpc.deadline_exceeded" and so on. A policy's
// non_retryable_errors and a retry.Decider see these types, so
// "grpc.unavailable" or "grpc.*" there stops what would be retried.
//
// By default two codes are retried, as far as the policy allows:
//
//   - UNAVAILABLE, always. Its meaning is "most likely a transient
//     condition, corrected by retrying with a backoff", and it is what
//     grpc-go reports when no connection could carry the RPC; gRFC A6's
//     examples and grpc-go's own retry support are built around it.
//   - RESOURCE_EXHAUSTED, only when the server pushed back with a delay
//     (see below). The code covers both a quota that will not come back for
//     hours and a brief overload, and only the server can tell them apart:
//     a pushback says when to come back, as an HTTP 429 with Retry-After
//     does. Without one, the call stops. grpc-go also reports this code for
//     a message over the size limit, which never carries a pushback.
//
// Every other code stops the call at once:
//
//   - DEADLINE_EXCEEDED: the caller's deadline travels with the RPC, so a
//     server that reports it has spent the caller's own time, and the
//     request may have run to the end. An attempt cut off by a per-attempt
//     timeout (retry.WithAttemptTimeout) is not this code but the engine's
//     type "timeout.attempt", and that is retried.
//   - ABORTED: a concurrency conflict; its definition says to retry at a
//     higher level (the whole read-modify-write), not the same request.
//   - UNKNOWN, INTERNAL, DATA_LOSS: the server failed in a way that says
//     nothing about whether the request took effect.
//   - CANCELED: someone canceled the RPC; retrying would undo that.
//   - INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
//     UNAUTHENTICATED, FAILED_PRECONDITION, OUT_OF_RANGE, UNIMPLEMENTED: the
//     request itself is at fault, and the same request fails the same way.
//
// RetryableCodes replaces the set, as A6's retryableStatusCodes does.
//
// # gRFC A6
//
// A server pushes back with the trailer grpc-retry-pushback-ms
// (PushbackKey): a whole number of milliseconds is the least wait before the
// next attempt (retry.After), never shortened by the policy's backoff; a
// negative or malformed value, or more than one, means "do not retry" and
// stops the call. A wait longer than the Retrier's maximum server delay, or
// one that cannot end before the caller's deadline, stops the call at once
// instead of sleeping into certain failure.
//
// Every retry carries the request metadata grpc-previous-rpc-attempts
// (PreviousAttemptsKey), the number of attempts before it.
//
// An RPC is committed once the server's response headers arrived: the
// server has begun to answer, and the RPC is never retried afterwards,
// whatever its status. For a server-streaming RPC, the stream is the
// caller's from its first header or message on, and later errors come to
// the caller untouched.
//
// Deadlines: every attempt runs within the caller's deadline, which grpc-go
// sends to the server; a per-attempt timeout (retry.WithAttemptTimeout) is a
// shorter deadline for each attempt, within the caller's. grpc-go's own
// retries (a service config's retryPolicy) would multiply the attempts of
// these interceptors; disable them with grpc.WithDisableRetry.
//
// # Breaker, rate limiter and budget
//
// Each call runs under a Retrier derived from the one given, sharing its
// state, with the connection's target as its key (retry.WithKey), or the
// target and the method with PerMethod. The breaker, the budget and a
// per-key rate limiter of the Retrier thus keep one state per target when
// they are configured per key (retry.Breaker.PerKey, retry.Budget.PerKey),
// and one in all otherwise. A breaker open on a target holds the call
// without consuming its attempts, within the breaker's MaxWait and the
// caller's deadline, as for HTTP; past them, the call stops with
// codes.Unavailable and type "breaker.open" without reaching the server.
//
// # Errors
//
// A call that fails returns the engine's *retry.Error (Attempts, Reason,
// Err), whose chain holds the last attempt's status: status.Code,
// status.FromError and errors.Is reach it, and retry.TypeOf reports its
// type. A call stopped before any attempt reached the server has a status of
// its own: codes.Canceled or codes.DeadlineExceeded when the caller's
// context ended, codes.Unavailable when the breaker or the rate limiter
// refused it.
package grpc
