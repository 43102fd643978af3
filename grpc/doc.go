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
// (PreviousAttemptsKey), the number of attempts before it. A call made
// while serving a retry (see UnaryServerInterceptor) sends it on every
// attempt, its first included, with at least the value the inbound
// request carried (an inbound 1 sends 1 on the first attempt; the number
// is retry.OutboundAttempt less one), so that the servers below do not
// retry it either.
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
// target and the method with PerMethod. The key is what events, logs,
// Stats, dead letters and metrics show, so the target goes into it
// without the credentials it may carry, as redact.SanitizeURL renders a
// URL (dns://user:pass@host/name becomes dns://host/name). The breaker, the budget and a
// per-key rate limiter of the Retrier thus keep one state per target when
// they are configured per key (retry.Breaker.PerKey, retry.Budget.PerKey),
// and one in all otherwise. A breaker open on a target holds the call
// without consuming its attempts, within the breaker's MaxWait and the
// caller's deadline, as for HTTP; past them, the call stops with
// codes.Unavailable and type "breaker.open" without reaching the server.
//
// # Per-call options
//
// CallOptions of this package, passed among a call's grpc.CallOptions,
// change that call alone, as go-grpc-middleware's per-call options do:
//
//	client.Check(ctx, req, retrygrpc.WithMax(5))           // five attempts
//	client.Check(ctx, req, retrygrpc.Disable())            // one attempt, no hedge
//	client.Check(ctx, req, retrygrpc.WithCodes(codes.Unavailable, codes.Aborted))
//	client.Check(ctx, req, retrygrpc.WithAttemptTimeout(200*time.Millisecond))
//	client.Check(ctx, req, retrygrpc.WithHedge(false))     // retries only
//
// A call with WithMax or WithAttemptTimeout runs under a Retrier derived
// for it, sharing the state of its key's (breaker, budget, limiter). The
// later of two options that set the same thing wins. An invalid value
// fails the call with codes.Internal before any attempt. Streams take all
// but WithHedge.
//
// # Hedging (gRFC A6)
//
// When the Retrier has a Hedge (retry.WithHedge), or a call asks with
// WithHedge(true), a unary call is hedged as A6's hedgingPolicy says, on
// the same hedging as retry.Hedged and the Transport:
//
//   - the first attempt is sent at once; when it has not returned after
//     the Hedge's Delay (or, with Delay zero, the Percentile of the recent
//     latencies of the call's key, which starts at the Ceiling, 1 s by
//     default, until 20 latencies are known), a hedge is sent beside it,
//     up to Max in flight and the policy's MaxAttempts in all;
//   - the first success wins: its reply, header, trailer and peer are the
//     caller's, and the other attempts are canceled;
//   - a retryable status (RetryableCodes or WithCodes: A6's
//     nonFatalStatusCodes) while other attempts are in flight sends the
//     next hedge at once, or, with a pushback, after the pushback's wait;
//     the hedges after it follow the delay again;
//   - any other status, or a response committed by its headers, ends the
//     call with that status, and cancels the attempts in flight;
//   - a pushback that says not to retry sends no further hedge; the
//     attempts in flight go on, and if they all fail the call ends with
//     the pushback's status;
//   - every hedge carries PreviousAttemptsKey, and passes the Retrier's
//     gates as a retry does: the breaker, a rate-limit token there at
//     once, a retry-budget token. Under a full outage, hedges and retries
//     together stay within the budget.
//
// When every attempt in flight has failed (the first one alone, before the
// delay, included) and attempts are left, the policy retries as usual
// after its backoff, and the retry is hedged in turn; where A6 sends the
// next hedge at once, the backoff keeps a server that fails fast from
// being sent the attempts back to back. A policy with the immediate
// backoff strategy and MaxAttempts equal to Hedge.Max behaves as A6.
//
// Hedging needs messages it can copy: the request and the reply must be
// protocol buffers (proto.Message), or the call is not hedged. The first
// attempt uses the caller's request and reply; each hedge sends a copy of
// the request, made while the call runs, and receives into a reply of its
// own, which is merged into the caller's when the hedge wins. Call options
// such as grpc.OnFinish run once per attempt, on the attempt's goroutine.
// Stream calls are never hedged.
//
// # Errors
//
// A call that fails returns an error whose status (status.FromError,
// status.Convert, status.Code) is, in this order:
//
//   - codes.Canceled when the caller's context was canceled before the
//     call stopped, in an attempt, between attempts or before the first
//     (its message is the context's error and cause), and
//     codes.DeadlineExceeded when its deadline passed, whatever status the
//     server sent once it had (a handler may wrap its context's error in
//     INTERNAL, and its answer may arrive before the client's timer fires);
//   - codes.DeadlineExceeded when the wait before the next attempt could
//     not end before the caller's deadline or the policy's MaxElapsed (a
//     pushback the Retrier refuses as longer than its maximum server delay,
//     though the deadline is further, reports the server's status below);
//   - the last attempt's status exactly, code, message and details, when
//     an attempt reached the server, whatever then stopped the call: the
//     attempts used up, a code not retried, the budget, the breaker;
//   - codes.Unavailable, with a message naming the refusal, when no
//     attempt ran because the breaker or the rate limiter refused the call;
//   - codes.Internal, with a message naming the option, the value and the
//     rule, when the Retrier (r.Err()), an Option or a CallOption is
//     invalid.
//
// errors.As reaches the engine's *retry.Error (Attempts, Reason, Err) in
// all but the last case, errors.Is the last attempt's status error and the
// context's error and cause, and retry.TypeOf reports the type. The
// error's own text (Error) is the engine's, which says why the call
// stopped; a server that passes the error on sends the status above.
package grpc
