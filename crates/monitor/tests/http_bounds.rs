//! The metrics endpoint under idle connections (issue 33, point 12: `tiny_http` started a
//! thread per connection, 675 threads at 1,000 idle connections). One test: the process's
//! thread count is what it measures, so nothing else in this binary runs beside it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use monitor::http::{IDLE_TIMEOUT, MAX_CONNECTIONS, MAX_REQUEST};
use monitor::{Monitor, MonitorOpts};

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

/// One request on a fresh connection: the status line and the body.
fn get(addr: SocketAddr, request: &[u8]) -> (String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text)
        .expect("the answer, then the close");
    let status = text.lines().next().unwrap_or("").to_string();
    let body = text.split_once("\r\n\r\n").map_or("", |b| b.1).to_string();
    (status, body)
}

#[test]
fn idle_connections_are_bounded_and_a_scrape_still_answers() {
    let before = threads();
    let monitor = Monitor::new(
        MonitorOpts {
            metrics: Some("127.0.0.1:0".into()),
            ..Default::default()
        },
        vec![],
    )
    .expect("monitor");
    let addr = monitor.metrics_addr().expect("listening");
    // 1,000 idle connections: connected, nothing sent.
    let t = Instant::now();
    let mut idle = Vec::with_capacity(1000);
    for _ in 0..1000 {
        idle.push(TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect"));
    }
    eprintln!("1000 connections opened in {:?}", t.elapsed());
    // Give the server time to take them all.
    std::thread::sleep(Duration::from_millis(500));
    let during = threads();
    eprintln!("threads: {before} before the server, {during} with 1000 idle connections");
    assert!(
        during <= before + 2,
        "{during} threads with 1000 idle connections, {before} before the server"
    );
    // A scrape answers beside them, at once.
    let t = Instant::now();
    let (status, body) = get(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    eprintln!("scrape beside 1000 idle connections: {:?}", t.elapsed());
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("# EOF"), "{body}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // Of the idle connections the server keeps at most MAX_CONNECTIONS; the others it closed.
    // The last ones opened are kept, then closed when IDLE_TIMEOUT passes.
    let t = Instant::now();
    let mut kept = idle.pop().expect("a connection");
    kept.set_read_timeout(Some(IDLE_TIMEOUT + Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 16];
    let closed = matches!(kept.read(&mut buf), Ok(0) | Err(_));
    let waited = t.elapsed();
    eprintln!("an idle connection closed after {waited:?} more");
    assert!(
        closed && waited < IDLE_TIMEOUT + Duration::from_secs(2),
        "{waited:?}"
    );
    let mut open = 0;
    for s in &mut idle {
        s.set_nonblocking(true).unwrap();
        if matches!(s.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
            open += 1;
        }
    }
    assert_eq!(
        open, 0,
        "{open} idle connections still open after the timeout"
    );
    drop(idle);
    // A request head past MAX_REQUEST is refused, not buffered.
    let mut big = b"GET /metrics HTTP/1.1\r\n".to_vec();
    while big.len() <= MAX_REQUEST {
        big.extend_from_slice(
            b"X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        );
    }
    let (status, _) = get(addr, &big);
    assert!(status.starts_with("HTTP/1.1 431"), "{status}");
    // Other methods and paths.
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"POST /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("answered");
    assert!(text.starts_with("HTTP/1.1 405"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("allow: get, head"),
        "{text}"
    );
    let (status, body) = get(addr, b"GET /nothing HTTP/1.1\r\n\r\n");
    assert!(
        status.starts_with("HTTP/1.1 404") && body.contains("/metrics"),
        "{status}"
    );
    // hyper answers an HTTP/1.0 request in HTTP/1.0.
    let (status, body) = get(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n");
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.0 200 OK", ""));
    let (status, body) = get(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n");
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", ""));
    // MAX_CONNECTIONS clients that each send their request after the others connected are all
    // answered (the bound closes idle connections for new ones, not ones that speak).
    let mut many: Vec<TcpStream> = (0..MAX_CONNECTIONS)
        .map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect"))
        .collect();
    for s in &mut many {
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    for s in &mut many {
        let mut text = String::new();
        s.read_to_string(&mut text).expect("answered");
        assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    }
    // Stopping the server closes the connections it still holds.
    let mut idle = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    idle.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    drop(monitor);
    assert!(threads() <= before, "the server's thread ended with it");
    let r = idle.read(&mut buf);
    let closed = match &r {
        Ok(n) => *n == 0,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed, "a connection outlived the server: {r:?}");
}
