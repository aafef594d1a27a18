//! A request's body read whole before the layers and the handler see it (up
//! to the body limit, within the deadline), so that no handler sits on its
//! state while a client sends its body. What is over the limit or still to
//! come is left, behind what was read, to the limit and deadline further in.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use http_body::Body;
use http_body_util::BodyExt;

/// `request` with its body read, up to its end, past `limit`, or until
/// `within` has passed; what is left (a body over the limit, one still
/// coming, or its error) is still to be read, behind what was, and the
/// limit and deadline further in deal with it.
pub(super) async fn read_whole(request: Request, limit: usize, within: Duration) -> Request {
    let (parts, mut body) = request.into_parts();
    if body.is_end_stream() {
        return Request::from_parts(parts, body);
    }
    let mut read: Vec<bytes::Bytes> = Vec::new();
    let mut failed = None;
    let reading = async {
        let mut length = 0;
        while !body.is_end_stream() && length <= limit {
            match body.frame().await {
                None => break,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        length += data.len();
                        read.push(data);
                    }
                }
                Some(Err(err)) => {
                    failed = Some(err);
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout(within, reading).await;
    let rest = match failed {
        Some(err) => axum::body::Body::new(Failed(Some(err))),
        None => body,
    };
    Request::from_parts(parts, Prefixed::body(read, rest))
}

/// A body of the chunks already read, then the rest.
struct Prefixed {
    read: std::vec::IntoIter<bytes::Bytes>,
    rest: axum::body::Body,
}

impl Prefixed {
    fn body(read: Vec<bytes::Bytes>, rest: axum::body::Body) -> axum::body::Body {
        match read.len() {
            0 => rest,
            1 if rest.is_end_stream() => {
                axum::body::Body::from(read.into_iter().next().unwrap_or_default())
            }
            _ => axum::body::Body::new(Self {
                read: read.into_iter(),
                rest,
            }),
        }
    }
}

impl Body for Prefixed {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, axum::Error>>> {
        if let Some(chunk) = self.read.next() {
            return Poll::Ready(Some(Ok(http_body::Frame::data(chunk))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.read.len() == 0 && self.rest.is_end_stream()
    }
}

/// A body whose reading failed, failing once more for whoever reads it.
struct Failed(Option<axum::Error>);

impl Body for Failed {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, axum::Error>>> {
        Poll::Ready(self.0.take().map(Err))
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tokio::time::Instant;

    use super::*;

    #[tokio::test]
    async fn a_body_is_read_whole_and_one_over_the_limit_is_left_whole_for_the_limit_further_in() {
        let chunks = |n: usize| {
            let frames = (0..n).map(|i| {
                Ok::<_, Infallible>(http_body::Frame::data(bytes::Bytes::from(vec![
                    b'a' + i
                        as u8;
                    4
                ])))
            });
            axum::body::Body::new(http_body_util::StreamBody::new(futures_util::stream::iter(
                frames,
            )))
        };
        for (n, limit) in [(1, 16), (3, 16), (8, 16)] {
            let request = read_whole(Request::new(chunks(n)), limit, Duration::from_secs(1)).await;
            let body = request.into_body().collect().await.unwrap().to_bytes();
            let expected: Vec<u8> = (0..n).flat_map(|i| vec![b'a' + i as u8; 4]).collect();
            assert_eq!(
                body.as_ref(),
                expected.as_slice(),
                "{n} chunks, limit {limit}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_still_coming_at_the_deadline_is_passed_on_with_what_came() {
        use futures_util::StreamExt;
        let first = futures_util::stream::iter([Ok::<_, Infallible>(http_body::Frame::data(
            bytes::Bytes::from_static(b"abc"),
        ))]);
        let frames = first.chain(futures_util::stream::pending());
        let body = axum::body::Body::new(http_body_util::StreamBody::new(frames));
        let started = Instant::now();

        let request = read_whole(Request::new(body), 16, Duration::from_secs(5)).await;

        assert_eq!(started.elapsed(), Duration::from_secs(5));
        let mut body = request.into_body();
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "abc");
        let rest = tokio::time::timeout(Duration::from_secs(1), body.frame()).await;
        assert!(rest.is_err(), "the rest is still to come");
    }
}
