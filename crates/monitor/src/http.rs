//! The metrics endpoint's HTTP server: one thread for every connection, non-blocking sockets
//! under poll(2), each answered once and closed (HTTP/1.1 `Connection: close`).
//!
//! Bounded in every way a client can push (issue 33: `tiny_http` started a thread per
//! connection, 675 threads for 1,000 idle ones): at most [`MAX_CONNECTIONS`] open at once (past
//! that the oldest connection still sending its request is closed for the new one, so a scraper
//! always gets in and idle ones cannot hold the server), [`IDLE_TIMEOUT`] from accept to the
//! response's last byte, and a request head of at most [`MAX_REQUEST`] bytes (431 past it).
//! Only `GET` and `HEAD` are answered (405 otherwise); the body of a request is never read.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Connections open at once.
pub const MAX_CONNECTIONS: usize = 64;
/// From a connection's accept to its response's last byte written.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request head (request line and headers) read.
pub const MAX_REQUEST: usize = 8192;
/// The longest the thread sleeps in poll(2) before it looks at its stop flag.
const POLL: Duration = Duration::from_millis(100);

/// A response: status, content type, body.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

/// What answers a request: its path (without the query) to a response.
pub type Handler = Box<dyn Fn(&str) -> Response + Send>;

/// A running server; stops when dropped.
pub struct Http {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Http {
    pub fn start(addr: SocketAddr, handler: Handler) -> Result<Http, String> {
        let listener = TcpListener::bind(addr).map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || serve(listener, handler, &flag))
            .map_err(|e| e.to_string())?;
        Ok(Http {
            addr: bound,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One open connection: reading its request head, then writing its response.
struct Conn {
    stream: TcpStream,
    since: Instant,
    head: Vec<u8>,
    /// The response and how much of it is written.
    out: Option<(Vec<u8>, usize)>,
}

enum Step {
    Keep,
    Close,
}

fn serve(listener: TcpListener, handler: Handler, stop: &AtomicBool) {
    let mut conns: Vec<Conn> = Vec::with_capacity(MAX_CONNECTIONS);
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(MAX_CONNECTIONS + 1);
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        // Past their time: closed.
        conns.retain(|c| now.duration_since(c.since) < IDLE_TIMEOUT);
        let wait = conns
            .iter()
            .map(|c| (c.since + IDLE_TIMEOUT).saturating_duration_since(now))
            .fold(POLL, Duration::min);
        fds.clear();
        fds.push(libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        fds.extend(conns.iter().map(|c| libc::pollfd {
            fd: c.stream.as_raw_fd(),
            events: if c.out.is_some() {
                libc::POLLOUT
            } else {
                libc::POLLIN
            },
            revents: 0,
        }));
        let ms = wait.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structs for the call's duration.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n <= 0 {
            // Timeout, or EINTR: look at the flag and the deadlines again.
            continue;
        }
        // Connections first (the indexes of `fds` are theirs), then new ones.
        let mut closed = vec![];
        for (i, (c, fd)) in conns.iter_mut().zip(&fds[1..]).enumerate() {
            if fd.revents == 0 {
                continue;
            }
            if let Step::Close = step(c, &handler) {
                closed.push(i);
            }
        }
        for i in closed.into_iter().rev() {
            conns.swap_remove(i);
        }
        if fds[0].revents != 0 {
            accept(&listener, &mut conns);
        }
    }
}

/// Take every waiting connection; past [`MAX_CONNECTIONS`] the oldest one still sending its
/// request makes room (one writing its answer is kept; with none to close, the new one is
/// answered 503 and closed).
fn accept(listener: &TcpListener, conns: &mut Vec<Conn>) {
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            // A connection reset before it was taken: the next one.
            Err(e) if e.kind() == ErrorKind::ConnectionAborted => continue,
            // Out of descriptors (the listener stays readable): pause rather than spin.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(10));
                return;
            }
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        if conns.len() >= MAX_CONNECTIONS {
            let oldest = conns
                .iter()
                .enumerate()
                .filter(|(_, c)| c.out.is_none())
                .min_by_key(|(_, c)| c.since)
                .map(|(i, _)| i);
            match oldest {
                Some(i) => {
                    conns.swap_remove(i);
                }
                None => {
                    let mut s = stream;
                    let _ = s.write(&response(&Response {
                        status: 503,
                        content_type: "text/plain",
                        body: "busy\n".into(),
                    }));
                    continue;
                }
            }
        }
        conns.push(Conn {
            stream,
            since: Instant::now(),
            head: Vec::new(),
            out: None,
        });
    }
}

/// Read what the connection sent or write what it is owed.
fn step(c: &mut Conn, handler: &Handler) -> Step {
    if let Some((out, at)) = &mut c.out {
        return match c.stream.write(&out[*at..]) {
            Ok(n) => {
                *at += n;
                if *at == out.len() {
                    let _ = c.stream.shutdown(std::net::Shutdown::Write);
                    Step::Close
                } else {
                    Step::Keep
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                Step::Keep
            }
            Err(_) => Step::Close,
        };
    }
    let mut buf = [0u8; 2048];
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => return Step::Close,
            Ok(n) => {
                c.head.extend_from_slice(&buf[..n]);
                if let Some(r) = answer(&c.head, handler) {
                    c.out = Some((r, 0));
                    // Try at once: most answers fit the socket's buffer.
                    return step(c, handler);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Keep,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Step::Close,
        }
    }
}

/// The response to a complete request head, `None` while it is incomplete and within
/// [`MAX_REQUEST`].
fn answer(head: &[u8], handler: &Handler) -> Option<Vec<u8>> {
    let end = head.windows(4).position(|w| w == b"\r\n\r\n");
    let plain = |status, body: &str| Response {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.into(),
    };
    let Some(end) = end.filter(|&e| e + 4 <= MAX_REQUEST) else {
        return (head.len() > MAX_REQUEST)
            .then(|| response(&plain(431, "request header too large\n")));
    };
    let line = head[..end].split(|&b| b == b'\r').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let mut r = match method {
        "GET" | "HEAD" => handler(path),
        _ => plain(405, "only GET\n"),
    };
    if method == "HEAD" {
        let len = r.body.len();
        let mut bytes = response(&r);
        // The head only, with the body's length.
        r.body.clear();
        bytes.truncate(bytes.len() - len);
        return Some(bytes);
    }
    Some(response(&r))
}

fn response(r: &Response) -> Vec<u8> {
    let reason = match r.status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        r.status,
        r.content_type,
        r.body.len()
    )
    .into_bytes();
    out.extend_from_slice(r.body.as_bytes());
    out
}
