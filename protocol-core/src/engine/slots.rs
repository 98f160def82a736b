//! Output slots: the queue plus the slots promised to responses that come later.

use super::state::Engine;
use crate::encode;
use crate::error::{ErrorCode, StopReason};
use crate::ids::RequestId;
use crate::limits::PENDING_OUTPUT_FRAMES;
use crate::outq::PushError;
use crate::time::Time;
use serde_json::Value;

impl Engine {
    pub(super) fn room(&self) -> bool {
        self.outq.len() + self.reserved < PENDING_OUTPUT_FRAMES
    }

    pub(super) fn respond(
        &mut self,
        id: Option<&RequestId>,
        out: Result<Value, ErrorCode>,
        now: Time,
    ) {
        let instance = &self.instance_id;
        let pushed = match &out {
            Ok(v) => self.outq.push(now, |seq, b| {
                encode::result(b, instance, seq, id.expect("results always carry an id"), v)
            }),
            Err(c) => self
                .outq
                .push(now, |seq, b| encode::error(b, instance, seq, id, *c)),
        };
        match pushed {
            Ok(_) => {}
            Err(PushError::TooLarge) => {
                // A result that cannot fit one frame is reported as such, never cut.
                let r = self.outq.push(now, |seq, b| {
                    encode::error(b, instance, seq, id, ErrorCode::ContentLimit)
                });
                if r.is_err() {
                    self.stop(StopReason::QueueOverflow, now);
                }
            }
            Err(PushError::Overflow) => self.stop(StopReason::QueueOverflow, now),
        }
    }

    pub(super) fn flush_incomplete(&mut self, now: Time) {
        if self.incomplete_pending && self.outq.len() < PENDING_OUTPUT_FRAMES {
            self.incomplete_pending = false;
            self.respond(None, Err(ErrorCode::IncompleteFrame), now);
        }
    }
}
