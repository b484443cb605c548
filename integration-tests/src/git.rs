//! git over smart HTTP for test upstreams: `git http-backend` run as a CGI program over a
//! directory of bare repositories, and `git` run with a clean configuration.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use bytes::Bytes;
use http::Response;

use crate::upstream::Recorded;

/// Runs `git` in `dir` with a clean configuration, panicking on failure.
pub fn git(dir: &Path, home: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Answers one request by running `git http-backend` as a CGI program over `root`.
pub fn git_http_backend(root: &Path, request: &Recorded) -> Response<Bytes> {
    let header = |name: &str| {
        request
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let mut cgi = Command::new("git");
    cgi.arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REQUEST_METHOD", request.method.as_str())
        .env("PATH_INFO", request.uri.path())
        .env("QUERY_STRING", request.uri.query().unwrap_or(""))
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", request.body.len().to_string())
        .env("REMOTE_USER", "x-access-token")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("HTTP_GIT_PROTOCOL", header("git-protocol"))
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cgi.spawn().expect("git http-backend starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let body = request.body.clone();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let out = child.wait_with_output().expect("git http-backend output");
    let _ = writer.join();
    let raw = out.stdout;
    let (head_end, sep) = match raw.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) => (i, 4),
        None => (
            raw.windows(2)
                .position(|w| w == b"\n\n")
                .expect("CGI output has a header block"),
            2,
        ),
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut response = Response::builder();
    let mut status = 200;
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            status = value[..3].parse().expect("CGI status");
        } else {
            response = response.header(name, value);
        }
    }
    response
        .status(status)
        .body(Bytes::copy_from_slice(&raw[head_end + sep..]))
        .expect("response")
}
