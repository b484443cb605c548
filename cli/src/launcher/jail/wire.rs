//! What sluice and its jail helper say to each other over the unix socket in the run
//! directory: the helper's sockets (file descriptors, `SCM_RIGHTS`) or why it failed, then
//! what to run. The launch message can hold a value granted `command` (the command's
//! environment): it is kept in zeroizing buffers on both sides.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

/// The helper's first message.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Ready {
    /// The namespaces are made; with it, three descriptors: the proxy listener, the
    /// capture listener and the resolver's socket, all inside the jail's network.
    Sockets,
    /// The jail could not be made, and why (no value is ever in it).
    Failed(String),
}

/// What the helper runs, once sluice serves its sockets.
#[derive(Serialize, Deserialize)]
pub(crate) struct Launch {
    /// CMD and its arguments, as bytes.
    pub(crate) argv: Vec<Vec<u8>>,
    /// CMD's whole environment.
    pub(crate) env: Vec<(Vec<u8>, Vec<u8>)>,
    /// Files to bind over others inside the jail (source, target): the trust store, the
    /// resolver's configuration.
    pub(crate) binds: Vec<(PathBuf, PathBuf)>,
    /// Whether CMD's stdin is a terminal of its own to make its controlling terminal.
    pub(crate) terminal: bool,
}

/// Sends `ready` and, with [`Ready::Sockets`], the descriptors.
pub(crate) fn send_ready(
    stream: &UnixStream,
    ready: &Ready,
    fds: &[&dyn AsFd],
) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(ready).map_err(std::io::Error::other)?;
    let borrowed: Vec<_> = fds.iter().map(|fd| fd.as_fd()).collect();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !borrowed.is_empty() && !control.push(SendAncillaryMessage::ScmRights(&borrowed)) {
        return Err(std::io::Error::other("too many descriptors"));
    }
    rustix::net::sendmsg(
        stream,
        &[IoSlice::new(&bytes)],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// Receives the helper's first message and the descriptors that came with it.
pub(crate) fn receive_ready(stream: &UnixStream) -> std::io::Result<(Ready, Vec<OwnedFd>)> {
    let mut bytes = vec![0u8; 4096];
    let (received, fds) = receive_with_fds(stream, &mut bytes)?;
    if received == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the jail helper ended before it was ready",
        ));
    }
    let ready = serde_json::from_slice(&bytes[..received]).map_err(std::io::Error::other)?;
    Ok((ready, fds))
}

/// Reads into `bytes` with up to three descriptors riding along (close-on-exec); how many
/// bytes came, and the descriptors.
fn receive_with_fds(
    stream: &UnixStream,
    bytes: &mut [u8],
) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = rustix::net::recvmsg(
        stream,
        &mut [IoSliceMut::new(bytes)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    Ok((received.bytes, fds))
}

/// Sends what to run, and closes sluice's side for writing (the end of the message).
pub(crate) fn send_launch(mut stream: &UnixStream, launch: &Launch) -> std::io::Result<()> {
    let bytes = Zeroizing::new(serde_json::to_vec(launch).map_err(std::io::Error::other)?);
    stream.write_all(&bytes)?;
    stream.shutdown(std::net::Shutdown::Write)
}

/// Receives what to run.
pub(crate) fn receive_launch(mut stream: &UnixStream) -> std::io::Result<Launch> {
    let mut bytes = Zeroizing::new(Vec::new());
    stream.read_to_end(&mut bytes)?;
    serde_json::from_slice(&bytes).map_err(std::io::Error::other)
}

/// Waits for the helper's last word: nothing (the line closed as it became CMD: its end of
/// the socket closes on exec), or why CMD could not start.
pub(crate) fn receive_outcome(mut stream: &UnixStream) -> Result<(), String> {
    let mut why = String::new();
    match stream.read_to_string(&mut why) {
        Ok(_) if why.is_empty() => Ok(()),
        Ok(_) => Err(why),
        Err(error) => Err(format!(
            "the jail helper could not say whether the command started: {error}"
        )),
    }
}

/// The largest handover accepted: far above any argv and environment `exec` takes.
const MAX_HANDOVER: usize = 64 << 20;

/// Hands what to run to the jail's init (the helper's side of their socket pair), with two
/// descriptors: CMD's stdin and the line to sluice, on which the init reports the outcome.
pub(crate) fn send_handover(
    mut stream: &UnixStream,
    launch: &Launch,
    fds: [&dyn AsFd; 2],
) -> std::io::Result<()> {
    let bytes = Zeroizing::new(serde_json::to_vec(launch).map_err(std::io::Error::other)?);
    let length = (bytes.len() as u64).to_be_bytes();
    let borrowed = fds.map(|fd| fd.as_fd());
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&borrowed)) {
        return Err(std::io::Error::other("too many descriptors"));
    }
    // The descriptors ride on the length; the message follows as plain bytes.
    let sent = rustix::net::sendmsg(
        stream,
        &[IoSlice::new(&length)],
        &mut control,
        SendFlags::empty(),
    )?;
    stream.write_all(&length[sent..])?;
    stream.write_all(&bytes)?;
    stream.shutdown(std::net::Shutdown::Write)
}

/// Receives what to run and its two descriptors ([`send_handover`]).
pub(crate) fn receive_handover(mut stream: &UnixStream) -> std::io::Result<(Launch, [OwnedFd; 2])> {
    let mut length = [0u8; 8];
    let (received, fds) = receive_with_fds(stream, &mut length)?;
    stream.read_exact(&mut length[received..])?;
    let fds: [OwnedFd; 2] = fds
        .try_into()
        .map_err(|_| std::io::Error::other("the jail's init got the wrong descriptors"))?;
    let length = usize::try_from(u64::from_be_bytes(length))
        .ok()
        .filter(|length| *length <= MAX_HANDOVER)
        .ok_or_else(|| std::io::Error::other("the jail's init got an oversized message"))?;
    let mut bytes = Zeroizing::new(vec![0u8; length]);
    stream.read_exact(&mut bytes)?;
    let launch = serde_json::from_slice(&bytes).map_err(std::io::Error::other)?;
    Ok((launch, fds))
}

impl Drop for Launch {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        for (_, value) in &mut self.env {
            value.zeroize();
        }
    }
}
