//! A future that runs to its end even if whoever awaits it goes away.

/// A call that may grant, awaited in place; if whoever awaits it goes away
/// before its end, a task of its own finishes it (and so hears its reply).
/// Only an abandoned call costs a task.
pub(super) struct RunToEnd<T: Send + 'static> {
    call: Option<std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>>,
}

impl<T: Send + 'static> RunToEnd<T> {
    pub(super) fn new(call: impl std::future::Future<Output = T> + Send + 'static) -> Self {
        Self {
            call: Some(Box::pin(call)),
        }
    }
}

impl<T: Send + 'static> std::future::Future for RunToEnd<T> {
    type Output = T;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<T> {
        let this = self.get_mut();
        let Some(call) = this.call.as_mut() else {
            return std::task::Poll::Pending;
        };
        let done = call.as_mut().poll(cx);
        if done.is_ready() {
            this.call = None;
        }
        done
    }
}

impl<T: Send + 'static> Drop for RunToEnd<T> {
    fn drop(&mut self) {
        if let (Some(call), Ok(runtime)) = (self.call.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(async move {
                let _ = call.await;
            });
        }
    }
}
