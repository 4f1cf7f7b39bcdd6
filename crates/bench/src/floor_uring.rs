//! The floor on io_uring (`floor --io uring`): the same do-nothing answers as
//! [`crate::floor`], with the design memcrab's `-o io=uring` worker uses, so that
//! design's floor is measured too: a multishot accept, a multishot receive per
//! connection into a provided buffer ring, registered files, and every reply of a
//! loop turn submitted together with one `io_uring_enter` that also waits.

use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::{cqueue, opcode, types, IoUring};
use memcrab_proto::text;

use crate::floor::answer;

const BUFFERS: u16 = 256;
const BUFFER_BYTES: usize = 16 * 1024;
const FILES: u32 = 4096;
const OP_ACCEPT: u64 = 1;
const OP_RECV: u64 = 2;
const OP_SEND: u64 = 3;

struct Conn {
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    /// Bytes a send is under way for (`out[sent..]` unsent).
    out: Vec<u8>,
    sent: usize,
    sending: bool,
    closed: bool,
}

fn ud(op: u64, slot: usize) -> u64 {
    (slot as u64) << 8 | op
}

/// Serves on `listener` until killed, on the calling thread.
pub fn serve(listener: TcpListener) -> anyhow::Result<()> {
    let mut ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(1024)?;
    ring.submitter().register_files_sparse(FILES)?;
    // The buffer ring and the buffers: leaked, they live as long as the process.
    let entries: &'static mut [types::BufRingEntry] = {
        let layout = std::alloc::Layout::from_size_align(
            usize::from(BUFFERS) * std::mem::size_of::<types::BufRingEntry>(),
            4096,
        )?;
        // SAFETY: the layout has a nonzero size; zeroed entries are valid.
        let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<types::BufRingEntry>();
        anyhow::ensure!(!p.is_null(), "out of memory");
        // SAFETY: p points at BUFFERS zeroed entries that are never freed.
        unsafe { std::slice::from_raw_parts_mut(p, usize::from(BUFFERS)) }
    };
    let bufs: &'static mut [u8] = Vec::leak(vec![0u8; usize::from(BUFFERS) * BUFFER_BYTES]);
    let base = bufs.as_mut_ptr();
    for (i, e) in entries.iter_mut().enumerate() {
        // SAFETY: i < BUFFERS: inside the buffers.
        e.set_addr(unsafe { base.add(i * BUFFER_BYTES) } as u64);
        e.set_len(BUFFER_BYTES as u32);
        e.set_bid(i as u16);
    }
    // SAFETY: the tail overlays the first entry's reserved field; the kernel reads it
    // concurrently, hence the atomic.
    let tail =
        unsafe { AtomicU16::from_ptr(types::BufRingEntry::tail(entries.as_ptr()).cast_mut()) };
    let mut tail_val = BUFFERS;
    // Release: the entries are written before the kernel sees the tail.
    tail.store(tail_val, Ordering::Release);
    // SAFETY: the entries are page aligned and live for the process.
    unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(entries.as_ptr() as u64, BUFFERS, 0, 0)?;
    }
    let accept = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
        .allocate_file_index(true)
        .build()
        .user_data(ud(OP_ACCEPT, 0));
    // SAFETY: the accept points at no memory of ours.
    unsafe { ring.submission().push(&accept) }.map_err(|_| anyhow::anyhow!("sq full"))?;
    let mut conns: Vec<Option<Conn>> = (0..FILES).map(|_| None).collect();
    let cfg = text::Config::default();
    let mut cqes: Vec<(u64, i32, u32)> = Vec::new();
    let mut dirty: Vec<usize> = Vec::new();
    // Connections that ended, dropped once no send is under way.
    let mut closing: Vec<usize> = Vec::new();
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        cqes.clear();
        cqes.extend(
            ring.completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        for &(u, res, flags) in &cqes {
            let (op, slot) = (u & 0xff, (u >> 8) as usize);
            match op {
                OP_ACCEPT if res >= 0 => {
                    let s = res as usize;
                    if let Some(c) = conns.get_mut(s) {
                        *c = Some(Conn {
                            rbuf: Vec::with_capacity(64 * 1024),
                            wbuf: Vec::with_capacity(64 * 1024),
                            out: Vec::with_capacity(64 * 1024),
                            sent: 0,
                            sending: false,
                            closed: false,
                        });
                        let r = opcode::RecvMulti::new(types::Fixed(s as u32), 0)
                            .build()
                            .user_data(ud(OP_RECV, s));
                        // SAFETY: the receive writes only into provided buffers.
                        while unsafe { ring.submission().push(&r) }.is_err() {
                            ring.submit()?;
                        }
                    }
                }
                OP_RECV => {
                    let bid = cqueue::buffer_select(flags);
                    if let Some(c) = conns.get_mut(slot).and_then(Option::as_mut) {
                        if res > 0 {
                            if let Some(b) = bid {
                                let off = usize::from(b) * BUFFER_BYTES;
                                c.rbuf.extend_from_slice(&bufs[off..off + res as usize]);
                            }
                            dirty.push(slot);
                        } else if res != -libc::ENOBUFS {
                            c.closed = true;
                            closing.push(slot);
                        }
                        if !cqueue::more(flags) && !c.closed {
                            let r = opcode::RecvMulti::new(types::Fixed(slot as u32), 0)
                                .build()
                                .user_data(ud(OP_RECV, slot));
                            // SAFETY: as above.
                            while unsafe { ring.submission().push(&r) }.is_err() {
                                ring.submit()?;
                            }
                        }
                    }
                    if let Some(b) = bid {
                        let e = &mut entries[usize::from(tail_val & (BUFFERS - 1))];
                        e.set_addr(base as u64 + (usize::from(b) * BUFFER_BYTES) as u64);
                        e.set_len(BUFFER_BYTES as u32);
                        e.set_bid(b);
                        tail_val = tail_val.wrapping_add(1);
                    }
                }
                OP_SEND => {
                    if let Some(c) = conns.get_mut(slot).and_then(Option::as_mut) {
                        c.sending = false;
                        if res < 0 {
                            c.closed = true;
                            closing.push(slot);
                        } else {
                            c.sent += res as usize;
                            if c.sent == c.out.len() {
                                c.out.clear();
                                c.sent = 0;
                            }
                            dirty.push(slot);
                        }
                    }
                }
                _ => {}
            }
        }
        // Release: the recycled entries are written before the new tail.
        tail.store(tail_val, Ordering::Release);
        for slot in dirty.drain(..) {
            let Some(c) = conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            let used = answer(&c.rbuf, &mut c.wbuf, &cfg);
            c.rbuf.drain(..used);
            if c.sending {
                continue;
            }
            if c.out.is_empty() {
                std::mem::swap(&mut c.out, &mut c.wbuf);
            }
            if c.sent < c.out.len() {
                let rest = &c.out[c.sent..];
                let s =
                    opcode::Send::new(types::Fixed(slot as u32), rest.as_ptr(), rest.len() as u32)
                        .build()
                        .user_data(ud(OP_SEND, slot));
                // SAFETY: `out` is not touched until this send completes.
                while unsafe { ring.submission().push(&s) }.is_err() {
                    ring.submit()?;
                }
                c.sending = true;
            }
        }
        closing.retain(|&slot| {
            if conns[slot].as_ref().is_some_and(|c| c.sending) {
                return true;
            }
            conns[slot] = None;
            let _ = ring.submitter().register_files_update(slot as u32, &[-1]);
            false
        });
    }
}
