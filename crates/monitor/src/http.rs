//! The metrics endpoint's HTTP server: hyper's HTTP/1 on a current-thread tokio runtime that
//! runs on one thread of its own, whatever the number of connections; each connection is
//! answered once and closed (HTTP/1.1 `Connection: close`).
//!
//! Bounded in every way a client can push (issue 33: `tiny_http` started a thread per
//! connection, 675 threads for 1,000 idle ones):
//! - at most [`MAX_CONNECTIONS`] open at once (a semaphore's permits). Past that the oldest
//!   connection whose request head has not arrived is closed for the new one, so a scraper
//!   always gets in and idle ones cannot hold the server; with every one of them being answered,
//!   the new one is answered 503 and closed. (Waiting for a permit, the library-natural way,
//!   would leave a scrape queued in the listen backlog behind every idle connection, 5 s for
//!   each 64 of them.)
//! - [`IDLE_TIMEOUT`] from accept to the response's last byte (`tokio::time::timeout` over the
//!   whole connection, and hyper's `header_read_timeout` for the head);
//! - a request head of at most [`MAX_REQUEST`] bytes (hyper's `max_buf_size`, whose minimum
//!   this is; 431 past it).
//!
//! Only `GET` and `HEAD` are answered (405 otherwise); the body of a request is never read.
//! Dropping the server ends its runtime, which drops every connection, and joins its thread.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{oneshot, Semaphore};

/// Connections open at once.
pub const MAX_CONNECTIONS: usize = 64;
/// From a connection's accept to its response's last byte written.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request head (request line and headers) read: hyper's smallest `max_buf_size`.
pub const MAX_REQUEST: usize = 8192;
/// Connections the kernel holds for the server before it takes them (tokio's own default).
const BACKLOG: u32 = 1024;

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
    /// Dropped to stop the server.
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Http {
    pub fn start(addr: SocketAddr, handler: Handler) -> Result<Http, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| e.to_string())?;
        let listener = {
            let _in = rt.enter();
            listen(addr).map_err(|e| e.to_string())?
        };
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                rt.block_on(serve(listener, Arc::new(Mutex::new(handler)), stopped));
                // Dropping the runtime here drops every connection still open.
            })
            .map_err(|e| e.to_string())?;
        Ok(Http {
            addr: bound,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Bound with a backlog of [`BACKLOG`] (std's `TcpListener::bind` asks for 128: 1,000 clients
/// connecting at once overflowed it before the thread took them, and each dropped SYN cost its
/// client a second).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// The connections whose request head has not arrived, by accept order (oldest first), each
/// with the sender that closes it.
type Waiting = Arc<Mutex<BTreeMap<u64, oneshot::Sender<()>>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A handler that panicked poisons nothing the server relies on.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn serve(
    listener: TcpListener,
    handler: Arc<Mutex<Handler>>,
    mut stopped: oneshot::Receiver<()>,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let waiting: Waiting = Arc::default();
    let mut id = 0u64;
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => return,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                // A connection reset before it was taken: the next one.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => continue,
                // Out of descriptors (the listener stays readable): pause rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let oldest = lock(&waiting).pop_first();
                let Some((_, close)) = oldest else {
                    busy(&stream);
                    continue;
                };
                // Its task drops its permit as soon as it runs (this thread, next).
                let _ = close.send(());
                match permits.clone().acquire_owned().await {
                    Ok(p) => p,
                    Err(_) => return,
                }
            }
        };
        id += 1;
        let (close, closed) = oneshot::channel();
        lock(&waiting).insert(id, close);
        tokio::spawn(connection(
            stream,
            id,
            handler.clone(),
            waiting.clone(),
            closed,
            permit,
        ));
    }
}

/// Every connection is busy being answered: 503, written if the socket takes it at once.
fn busy(stream: &TcpStream) {
    let _ = stream.try_write(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\
          Content-Length: 5\r\nConnection: close\r\n\r\nbusy\n",
    );
}

async fn connection(
    stream: TcpStream,
    id: u64,
    handler: Arc<Mutex<Handler>>,
    waiting: Waiting,
    mut closed: oneshot::Receiver<()>,
    _permit: tokio::sync::OwnedSemaphorePermit,
) {
    let w = waiting.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        // The head is in: no longer one to close for a newcomer.
        lock(&w).remove(&id);
        let r = answer(&req, &handler);
        async move { Ok::<_, Infallible>(r) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(IDLE_TIMEOUT)
        .max_buf_size(MAX_REQUEST)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        // Served, failed or past its time: closed either way.
        _ = tokio::time::timeout(IDLE_TIMEOUT, conn) => {}
        // Closed for a newcomer (an `Err` is the sender dropped once the head arrived).
        Ok(()) = &mut closed => {}
    }
    lock(&waiting).remove(&id);
}

fn answer(req: &Request<Incoming>, handler: &Mutex<Handler>) -> hyper::Response<Full<Bytes>> {
    let r = match *req.method() {
        Method::GET | Method::HEAD => lock(handler)(req.uri().path()),
        _ => Response {
            status: 405,
            content_type: "text/plain; charset=utf-8",
            body: "only GET and HEAD\n".into(),
        },
    };
    // hyper writes a HEAD answer's head only, with the body's length.
    let mut out = hyper::Response::new(Full::new(Bytes::from(r.body)));
    *out.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    out.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(r.content_type));
    if r.status == 405 {
        out.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    out
}
