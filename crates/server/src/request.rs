//! The request step: one transport-independent function from (a connection's
//! protocol state, input bytes, context, output) to (bytes consumed, what follows).
//! Every transport is a thin loop around it.
//!
//! ```text
//!   io/conn.rs (TCP, unix, TLS; fed by io/epoll.rs or io/uring/)
//!        │                      io/udp.rs (datagrams)
//!        │ Session::serve       │ Session::step
//!        ▼                      ▼
//!   request.rs  Session: protocol (negotiated), -Y auth, SASL, swallow, resume
//!        │ frame + decode (memcrab_proto)
//!        ▼
//!   exec/{text,meta,binary}.rs ──► store
//! ```
//!
//! [`Session::step`] serves at most one request from the front of the input and says
//! how many bytes it used and what follows ([`Done`]), or that the input holds no
//! complete request yet (`None`). [`Session::serve`] runs steps while a budget
//! (`-R`) and an output limit allow, says why it stopped ([`Stop`]), and overlaps
//! the cache misses of pipelined text requests by parsing ahead (see there). A transport decides only
//! what is its own: how bytes arrive and leave, and (for UDP) how replies are framed.
//!
//! What a connection carries between steps lives in [`Session`]: the protocol
//! (`-B`, decided by the first byte under `auto`), the `-Y` authentication state,
//! the binary SASL state, the bytes of a refused value still to discard, and how far
//! a suspended multi-get or key dump got.

use memcrab_proto::binary::{self as bin, Frame, Reject};
use memcrab_proto::text::admin::Admin;
use memcrab_proto::text::meta::Meta;
use memcrab_proto::text::{self, Action, Request};

use crate::exec::binary::SaslState;
use crate::exec::probe::{self, Batch, Source};
use crate::exec::{self, Flow, Resume};
use crate::out::Out;
use crate::server::{ConnState, Ctx};
use crate::startup::settings::{parse_config, Protocol, Settings};

/// memcached's `try_read_command_asciiauth` closes a connection whose first line
/// has no newline within this many bytes.
const AUTH_LINE_MAX: usize = 2048;
/// ... or whose line is shorter than this, `\r` included (`MIN_AUTH_REQ_LEN`,
/// memcached 1.6.45).
const AUTH_LINE_MIN: usize = 6;
/// The longest auth token block memcached 1.6.45 accepts (`MAX_AUTH_REQ_LEN`).
const AUTH_TOKEN_MAX: u32 = 16384;

/// What one step did, when it served anything (a step that returns `None` found
/// no complete request and consumed nothing: a stream waits for more bytes, a
/// datagram ends there): `consumed` bytes of the input are used up, any reply is
/// in the output, and `flow` says what follows. `counted` is false when the step
/// only discarded or completed bytes of a request already counted (they do not
/// count against `-R`).
#[derive(Debug, PartialEq, Eq)]
pub struct Done {
    pub consumed: usize,
    pub flow: Flow,
    pub counted: bool,
}

/// Why [`Session::serve`] stopped, named for what the transport does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Read more: the rest of the input is not a complete request.
    Read,
    /// Come back later: the budget is used up with requests still buffered.
    Yield,
    /// Send first: the output is over its limit (a multi-get may be suspended).
    Send,
    /// Send what is pending, then close; the rest of the input is dropped. `quit`:
    /// the client asked (`quit`, `shutdown`; memcached logs a `normal` close); else
    /// a request that cannot be served ([`Flow::Hangup`]).
    Finish { quit: bool },
    /// Ask [`Session::accept_watch`] whether the `watch` that ended the batch (it is
    /// consumed) stands, and serve on if not.
    Watch,
    /// Close now, without sending anything more.
    Close,
}

/// [`Session::serve`] stops before its next request when the budget is used up
/// ([`Stop::Yield`]) or the output is over its limit ([`Stop::Send`]).
#[inline(always)]
fn stop_before(budget: usize, out: &Out, out_limit: usize) -> Option<Stop> {
    if budget == 0 {
        Some(Stop::Yield)
    } else if out.len() > out_limit {
        Some(Stop::Send)
    } else {
        None
    }
}

/// What [`Session::serve`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// Bytes of the input used up.
    pub consumed: usize,
    pub stop: Stop,
}

/// A connection's protocol, as memcached's `c->protocol`/`try_read_command`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    /// `-B auto`: the first byte decides.
    Negotiate,
    Ascii,
    /// `-Y`: only the authentication `set` until it succeeds.
    AsciiAuth,
    Binary,
}

/// One connection's (or one datagram's) request state.
#[derive(Debug)]
pub struct Session {
    proto: Proto,
    /// The parsers' limits (`-I`, `-C`).
    cfg: text::Config,
    /// Binary protocol SASL state (`-S`).
    sasl: SaslState,
    /// `-Y`: the length (with `\r\n`) of an auth token block announced by a `set`
    /// line and not yet consumed.
    auth_pending: Option<usize>,
    /// `-Y`: where in the output this batch's last auth reply starts (see
    /// [`Session::auth_step`]).
    auth_reply_at: Option<usize>,
    /// Bytes of a refused data block still to discard.
    swallow: usize,
    /// How far a suspended multi-get or key dump got.
    resume: Resume,
    /// Where the `watch` that ended the last batch ([`Stop::Watch`]) starts in that
    /// `serve` call's input.
    watch_at: Option<usize>,
    /// The requests of this `serve` (or `step`) call still to record in the
    /// latency histograms, and when the call started.
    batch: Batch,
}

impl Session {
    /// A stream connection's session: the protocol follows `-B` (and `-Y`).
    pub fn new(s: &Settings) -> Self {
        let proto = match s.protocol {
            Protocol::Auto => Proto::Negotiate,
            Protocol::Binary => Proto::Binary,
            Protocol::Ascii if s.auth_file.is_some() => Proto::AsciiAuth,
            Protocol::Ascii => Proto::Ascii,
        };
        Session::with_proto(s, proto)
    }

    /// A connection of a `-l proto[...]:` listener speaks that protocol instead of
    /// `-B`'s (memcached's `server_sockets`); under `-Y` every connection stays
    /// ASCII with authentication (such a listener cannot be binary).
    pub fn set_protocol(&mut self, p: Protocol) {
        if self.proto != Proto::AsciiAuth {
            self.proto = match p {
                Protocol::Auto => Proto::Negotiate,
                Protocol::Ascii => Proto::Ascii,
                Protocol::Binary => Proto::Binary,
            };
        }
    }

    /// A datagram's session: the first payload byte picks the protocol whatever `-B`
    /// says (memcached's `try_read_command_udp`), and nothing is remembered past
    /// the datagram.
    pub fn datagram(s: &Settings, binary: bool) -> Self {
        Session::with_proto(s, if binary { Proto::Binary } else { Proto::Ascii })
    }

    fn with_proto(s: &Settings, proto: Proto) -> Self {
        Session {
            proto,
            cfg: parse_config(s),
            sasl: SaslState::default(),
            auth_pending: None,
            auth_reply_at: None,
            swallow: 0,
            resume: Resume::default(),
            watch_at: None,
            batch: Batch::default(),
        }
    }

    /// Keys of the current multi-get already answered (0 when none is suspended).
    pub fn resume(&self) -> usize {
        self.resume.keys
    }

    /// What the connection waits for, with `buffered` unserved (memcached's
    /// connection states, for `stats conns`): a value after a complete line (or
    /// binary header, extras and key), else a read.
    pub fn waiting(&self, buffered: &[u8]) -> ConnState {
        if self.swallow > 0 {
            return ConnState::Swallow;
        }
        let whole = match self.proto {
            Proto::Binary => buffered.get(..bin::HEADER_LEN).is_some_and(|h| {
                let ahead = usize::from(u16::from_be_bytes([h[2], h[3]])) + usize::from(h[4]);
                buffered.len() >= bin::HEADER_LEN + ahead
            }),
            _ => buffered.contains(&b'\n'),
        };
        if whole {
            ConnState::Nread
        } else {
            ConnState::Read
        }
    }

    /// Discards what `input` holds of a refused data block; returns the bytes used.
    #[inline]
    pub fn skip(&mut self, input: &[u8]) -> usize {
        let n = self.swallow.min(input.len());
        self.swallow -= n;
        n
    }

    /// Serves at most one request from the front of `input`, appending its reply to
    /// `out`. A multi-get pauses between keys once `out` is longer than `out_limit`
    /// ([`Flow::Suspend`]: nothing is consumed; call again with the same input).
    /// The request is timed alone.
    pub fn step(
        &mut self,
        input: &[u8],
        cx: &Ctx<'_>,
        out: &mut Out,
        out_limit: usize,
    ) -> Option<Done> {
        self.batch.begin(cx);
        let done = self.step_on(input, cx, out, out_limit);
        self.batch.end(cx);
        done
    }

    /// [`Session::step`] within a batch (`serve`'s, or `step`'s of one).
    fn step_on(
        &mut self,
        input: &[u8],
        cx: &Ctx<'_>,
        out: &mut Out,
        out_limit: usize,
    ) -> Option<Done> {
        if self.swallow > 0 {
            let n = self.skip(input);
            if n == 0 {
                return None;
            }
            return Some(Done {
                consumed: n,
                flow: Flow::Next,
                counted: false,
            });
        }
        if input.is_empty() {
            return None;
        }
        match self.proto {
            Proto::Ascii => match text::parse(input, &self.cfg) {
                Some(parsed) => self.run_text(parsed, input, cx, out, out_limit),
                None => None,
            },
            Proto::Binary => self.binary_step(input, cx, out),
            Proto::AsciiAuth => self.auth_step(input, cx, out),
            Proto::Negotiate => {
                self.proto = if input[0] == bin::REQ_MAGIC {
                    Proto::Binary
                } else {
                    Proto::Ascii
                };
                self.step_on(input, cx, out, out_limit)
            }
        }
    }

    /// Serves requests from the front of `input` while `budget` lasts (each request
    /// costs one) and `out` is at most `out_limit` bytes long.
    ///
    /// Latency: the request clock is read at this call's start and end (or, for a
    /// request that is the call's only one and the last of its input, as its reply
    /// is queued), and each request timed in it is recorded as an equal share of
    /// the time between
    /// (`exec/probe.rs`, `Batch`): its parse, its execution, the parse-ahead for
    /// the requests after it, and whatever else the call did (a parse error's
    /// reply, discarded bytes, a paused multi-get's first keys).
    ///
    /// Pipelined text requests overlap their cache misses: while request i executes,
    /// request i+1 (parsed one step earlier, its index bucket prefetched then) has
    /// its item prefetched, and request i+2 is parsed and its bucket prefetched.
    /// `next1`/`next2` are those parsed requests, in order, starting where the
    /// current one ends; anything but [`Flow::Next`] drops them (they are parsed
    /// again, from the right place, on the next turn).
    ///
    /// Always inlined: into each driver's `Conn::drive`, the request path (called
    /// from two of them, it was otherwise kept out of line: 100 instructions a
    /// request on W1).
    #[inline(always)]
    pub fn serve(
        &mut self,
        input: &[u8],
        cx: &Ctx<'_>,
        out: &mut Out,
        budget: &mut usize,
        out_limit: usize,
    ) -> Served {
        // memcached reuses one auth response object until it transmits; a batch is
        // what is sent at once.
        self.auth_reply_at = None;
        if input.is_empty() {
            // Nothing to serve (a transport's call before it reads): the loop below
            // would stop at once, for the same reasons, and time no request.
            let stop = stop_before(*budget, out, out_limit).unwrap_or(Stop::Read);
            return Served { consumed: 0, stop };
        }
        self.batch.begin(cx);
        let mut pos = 0;
        let mut next1: Option<text::Parsed<'_>> = None;
        let mut next2: Option<text::Parsed<'_>> = None;
        let stop = loop {
            if let Some(stop) = stop_before(*budget, out, out_limit) {
                break stop;
            }
            let rest = &input[pos..];
            let step = if self.proto == Proto::Ascii && self.swallow == 0 {
                let (parsed, consumed) = match next1.take() {
                    Some(p) => p,
                    None => match (!rest.is_empty()).then(|| text::parse(rest, &self.cfg)) {
                        Some(Some(p)) => p,
                        _ => break Stop::Read,
                    },
                };
                next1 = next2.take();
                // This request costs one of the budget; look ahead only if more
                // requests may run in this batch.
                let left = *budget - 1;
                if left > 0 && lookahead(&parsed) {
                    let mut end = pos + consumed;
                    match &next1 {
                        Some((Ok(req), used)) => {
                            prefetch(cx, req, false);
                            end += used;
                        }
                        Some(_) => {}
                        None => {
                            next1 = parse_ahead(&input[end..], &self.cfg, cx);
                            end += next1.as_ref().map_or(0, |n| n.1);
                        }
                    }
                    if left > 1 && next1.as_ref().is_some_and(|n| lookahead(&n.0)) {
                        next2 = parse_ahead(&input[end..], &self.cfg, cx);
                    }
                }
                if let Ok(Request::Admin(Admin::Crawl { .. })) = parsed {
                    self.resume.stacked = replies_stacked(&input[..pos], &self.cfg);
                }
                let step = self.run_text((parsed, consumed), rest, cx, out, out_limit);
                if !matches!(
                    step,
                    Some(Done {
                        flow: Flow::Next,
                        ..
                    })
                ) {
                    (next1, next2) = (None, None);
                }
                step
            } else {
                self.step_on(rest, cx, out, out_limit)
            };
            let Some(Done {
                consumed,
                flow,
                counted,
            }) = step
            else {
                break Stop::Read;
            };
            if counted {
                *budget -= 1;
            }
            pos += consumed;
            match flow {
                Flow::Next | Flow::Swallow(_) => {}
                Flow::Suspend => break Stop::Send,
                Flow::Quit => {
                    pos = input.len();
                    break Stop::Finish { quit: true };
                }
                Flow::Hangup => {
                    pos = input.len();
                    break Stop::Finish { quit: false };
                }
                Flow::Close => break Stop::Close,
                Flow::Watch => {
                    self.watch_at = Some(pos - consumed);
                    break Stop::Watch;
                }
            }
        };
        self.batch.end(cx);
        Served {
            consumed: pos,
            stop,
        }
    }

    /// Executes a parsed text request (or answers its parse error), which is at the
    /// front of `input`, all of which a [`Flow::Close`] consumes. Always inlined:
    /// out of line, the parsed request was copied on entry (some 60 instructions
    /// a request on W2, callgrind).
    #[inline(always)]
    fn run_text(
        &mut self,
        (parsed, consumed): text::Parsed<'_>,
        input: &[u8],
        cx: &Ctx<'_>,
        out: &mut Out,
        out_limit: usize,
    ) -> Option<Done> {
        let (consumed, flow) = match parsed {
            Ok(req) => {
                // Meta requests come through the text parser but have their own
                // executor, beside the classic commands'.
                let flow = match req {
                    Request::Meta(m) => exec::meta::execute(m, cx, out),
                    req => exec::text::execute(req, cx, out, &mut self.resume, out_limit),
                };
                if flow == Flow::Suspend {
                    probe::suspended(cx);
                    (0, Flow::Suspend)
                } else {
                    let last = consumed == input.len();
                    if probe::done(cx, out, &mut self.batch, last) {
                        probe::slow(cx, &mut self.batch, Source::Text(input, &self.cfg));
                    }
                    if let Flow::Swallow(n) = flow {
                        self.swallow = n;
                    }
                    (consumed, flow)
                }
            }
            Err(e) => match e.action() {
                Action::Reply(r) => {
                    out.extend_from_slice(r.unwrap_or_default());
                    (consumed, Flow::Next)
                }
                Action::Swallow(r, n) => {
                    out.extend_from_slice(r.unwrap_or_default());
                    self.swallow = n;
                    (consumed, Flow::Swallow(n))
                }
                // memcached 1.6.45 closes at once: replies to earlier requests of the
                // same read are dropped with the rest.
                Action::Close => (input.len(), Flow::Close),
            },
        };
        Some(Done {
            consumed,
            flow,
            counted: true,
        })
    }

    /// After [`Stop::Watch`] (or a [`Flow::Watch`] from `step`): `watch`'s checks (see
    /// [`exec::admin::watch`]), given the input of that `serve` (or `step`) call, then
    /// the event types to stream, or `None` when it was refused (with its reply in
    /// `out`).
    #[cold]
    #[inline(never)]
    pub fn accept_watch(&mut self, input: &[u8], cx: &Ctx<'_>, out: &mut Vec<u8>) -> Option<u16> {
        // A `watch` met by `step` (a datagram's) starts its input.
        let at = self.watch_at.take().unwrap_or(0);
        // The `watch` line is parsed again here, so that the request path carries
        // nothing for it.
        let (before, line) = input.split_at_checked(at)?;
        let Some((Ok(Request::Admin(Admin::Watch { events, noreply })), _)) =
            text::parse(line, &self.cfg)
        else {
            return None;
        };
        let stacked = replies_stacked(before, &self.cfg);
        exec::admin::watch(events, noreply, stacked, cx, out)
    }

    /// One binary packet (`try_read_command_binary` and `dispatch_bin_command`).
    fn binary_step(&mut self, input: &[u8], cx: &Ctx<'_>, out: &mut Out) -> Option<Done> {
        let (header, extras, key) = match bin::frame(input) {
            Frame::NeedMore => return None,
            // memcached closes at once, dropping replies not yet sent.
            Frame::BadMagic => {
                return Some(Done {
                    consumed: input.len(),
                    flow: Flow::Close,
                    counted: false,
                })
            }
            Frame::Packet(header, extras, key) => (header, extras, key),
        };
        let prefix = header.prefix_len();
        let sasl_on = cx.server.settings.sasl;
        let decoded = bin::decode(&header, extras, key, sasl_on, self.sasl.authenticated)
            .and_then(|req| exec::binary::with_value_len(req, &self.cfg, cx));
        let (req, value_len) = match decoded {
            Ok(r) => r,
            Err(Reject::Close(st)) => {
                bin::error(out, &header, st);
                return Some(Done {
                    consumed: input.len(),
                    flow: Flow::Hangup,
                    counted: true,
                });
            }
            Err(Reject::Swallow(st, n)) => {
                bin::error(out, &header, st);
                self.swallow = n;
                return Some(Done {
                    consumed: prefix,
                    flow: Flow::Swallow(n),
                    counted: true,
                });
            }
        };
        let value = input.get(prefix..prefix + value_len)?;
        let flow = exec::binary::execute(&header, req, value, cx, out, &mut self.sasl);
        if flow == Flow::Suspend {
            probe::suspended(cx);
        } else if probe::done(cx, out, &mut self.batch, prefix + value_len == input.len()) {
            probe::slow(cx, &mut self.batch, Source::Binary(key));
        }
        if let Flow::Swallow(n) = flow {
            self.swallow = n;
        }
        Some(Done {
            consumed: prefix + value_len,
            flow,
            counted: true,
        })
    }

    /// memcached 1.6.45's `try_read_command_asciiauth` (`-Y`): before
    /// authentication only `set <key> <flags> <exptime> <bytes>` followed by
    /// `<user> <password>` is served; a line too short to be one closes, every
    /// other line answers `CLIENT_ERROR unauthenticated`. The `set` line and its
    /// token block are one request; a block that arrives later completes it without
    /// counting again.
    fn auth_step(&mut self, input: &[u8], cx: &Ctx<'_>, out: &mut Vec<u8>) -> Option<Done> {
        let mut used = 0;
        let counted = self.auth_pending.is_none();
        let need = match self.auth_pending {
            Some(n) => n,
            None => {
                if input.len() < 3 {
                    return None;
                }
                let close = Some(Done {
                    consumed: input.len(),
                    flow: Flow::Close,
                    counted: true,
                });
                let Some(el) = input.iter().position(|&b| b == b'\n') else {
                    return if input.len() > AUTH_LINE_MAX {
                        close
                    } else {
                        None
                    };
                };
                if el < AUTH_LINE_MIN {
                    return close;
                }
                let size = auth_size(&input[..el]);
                used = el + 1;
                let refused = match size {
                    None => b"CLIENT_ERROR unauthenticated\r\n".as_slice(),
                    Some(n) if n > AUTH_TOKEN_MAX => b"CLIENT_ERROR auth token too long\r\n",
                    Some(n) => {
                        self.auth_pending = Some(n as usize + 2);
                        b""
                    }
                };
                if !refused.is_empty() {
                    self.auth_reply(out, refused);
                    return Some(Done {
                        consumed: used,
                        flow: Flow::Next,
                        counted,
                    });
                }
                self.auth_pending.unwrap_or_default()
            }
        };
        let Some(block) = input.get(used..used + need) else {
            // The line is served; its block completes it later.
            return if used > 0 {
                Some(Done {
                    consumed: used,
                    flow: Flow::Next,
                    counted,
                })
            } else {
                None
            };
        };
        self.auth_pending = None;
        let done = Some(Done {
            consumed: used + need,
            flow: Flow::Next,
            counted,
        });
        let Some(payload) = block.strip_suffix(b"\r\n") else {
            self.auth_reply(out, b"CLIENT_ERROR bad command line termination\r\n");
            return done;
        };
        // The user is what comes before the first space, the password all after it.
        let Some(mid) = payload.iter().position(|&b| b == b' ') else {
            self.auth_reply(out, b"CLIENT_ERROR bad authentication token format\r\n");
            return done;
        };
        let (user, password) = (&payload[..mid], &payload[mid + 1..]);
        let ok = cx.server.users().is_some_and(|u| u.check(user, password));
        cx.counters.auth_cmds.incr();
        if ok {
            self.auth_reply(out, b"STORED\r\n");
            self.proto = Proto::Ascii;
        } else {
            cx.counters.auth_errors.incr();
            self.auth_reply(out, b"CLIENT_ERROR authentication failure\r\n");
        }
        done
    }

    /// Appends an auth-mode reply, replacing the previous one of this batch:
    /// memcached reuses one response object until it transmits.
    fn auth_reply(&mut self, out: &mut Vec<u8>, reply: &[u8]) {
        if let Some(start) = self.auth_reply_at {
            out.truncate(start);
        }
        self.auth_reply_at = Some(out.len());
        out.extend_from_slice(reply);
    }
}

/// memcached's `resp_has_stack` at a `watch` (or a key dump) that follows `before`
/// in one batch:
/// does memcached still hold replies of those requests? `mn` writes every reply so
/// far out at once; any other request leaves its reply (even an empty `noreply`
/// one) queued, a text get included (1.6.35's get batches with what follows it:
/// `process_get_command` goes on to `conn_new_cmd`). Called only for `watch` and
/// `lru_crawler`: `before` is parsed again.
fn replies_stacked(before: &[u8], cfg: &text::Config) -> bool {
    let mut stacked = false;
    let mut pos = 0;
    while let Some((parsed, consumed)) = before.get(pos..).and_then(|b| text::parse(b, cfg)) {
        pos += consumed;
        // A refused data block follows its line; it was discarded, not parsed.
        pos += match &parsed {
            Ok(Request::TooLarge { swallow, .. })
            | Err(text::Error::BadStoreLine { swallow, .. })
            | Ok(Request::Meta(Meta::SetTooLarge { swallow, .. }))
            | Ok(Request::Meta(Meta::Fail { swallow, .. })) => *swallow,
            _ => 0,
        };
        stacked = !matches!(parsed, Ok(Request::Meta(Meta::Noop)));
        if pos >= before.len() {
            break;
        }
    }
    stacked
}

/// Whether to look past a request: only gets and complete stores, the requests
/// that pipelines are made of (anything else may change how what follows parses).
fn lookahead(parsed: &Result<Request<'_>, text::Error>) -> bool {
    matches!(parsed, Ok(Request::Get { .. } | Request::Store { .. }))
}

/// Parses the request at the front of `input` (if complete) and starts loading its
/// key's index bucket.
fn parse_ahead<'a>(input: &'a [u8], cfg: &text::Config, cx: &Ctx<'_>) -> Option<text::Parsed<'a>> {
    if input.is_empty() {
        return None;
    }
    let p = text::parse(input, cfg);
    if let Some((Ok(req), _)) = &p {
        prefetch(cx, req, true);
    }
    p
}

/// Starts loading a pipelined request's (first) key: its index bucket, or, once
/// that is cached, its item (gets only: a set does not read the old item).
fn prefetch(cx: &Ctx<'_>, req: &Request<'_>, index: bool) {
    let key = match req {
        Request::Get { keys, .. } => keys.clone().next(),
        Request::Store { key, .. } if index => Some(*key),
        _ => None,
    };
    match key {
        Some(k) if index => cx.engine.prefetch_index(k),
        Some(k) => cx.engine.prefetch_item(k),
        None => {}
    }
}

/// The token block's length that an auth line announces, if it is a `set` line
/// (memcached 1.6.45 checks only that the line starts with `set`) of at least five
/// tokens whose fifth is a number (mcmc's strict u32). `line` lacks its `\n`; like
/// 1.6.45's tokenizer, which expects one, the last byte is dropped unless the one
/// before it is a `\r` (so a bare-`\n` line loses its last character).
fn auth_size(line: &[u8]) -> Option<u32> {
    let end = if line.len() >= 2 && line[line.len() - 2] == b'\r' {
        line.len() - 2
    } else {
        line.len().saturating_sub(1)
    };
    if !line.starts_with(b"set") {
        return None;
    }
    let mut tokens = line[..end].split(|&b| b == b' ').filter(|t| !t.is_empty());
    let size = tokens.nth(4)?;
    let digits = size.len() <= 11 && !size.is_empty() && size.iter().all(u8::is_ascii_digit);
    digits.then(|| std::str::from_utf8(size).ok()?.parse().ok())?
}
