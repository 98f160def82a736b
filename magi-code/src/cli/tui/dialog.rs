//! The approval dialog: the request's summary and card, a countdown to its expiry, and an
//! answer field that takes `y`/`yes` or `n`/`no` and asks again for anything else.

use std::time::{Duration, Instant};

/// What the person answered, once the field holds a valid answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `y` or `yes`.
    Allow,
    /// `n` or `no`.
    Deny,
}

/// One open approval request.
#[derive(Debug)]
pub struct Dialog {
    /// The run the request belongs to.
    pub run_id: String,
    /// The request's ID.
    pub approval_id: String,
    /// What the tool wants to do.
    pub summary: String,
    /// The tool's running card, as one line, when `tool.cards` gave one.
    pub card: Option<String>,
    /// When the dialog appeared: keys read before it never answer it.
    pub shown_at: Instant,
    /// When the request expires.
    pub expires_at: Instant,
    /// The answer typed so far.
    pub field: String,
    /// Why the last answer was asked again.
    pub hint: Option<String>,
}

impl Dialog {
    /// A dialog shown at `now` for a request expiring `expires_in` later.
    pub fn new(
        ids: (String, String),
        summary: String,
        card: Option<String>,
        now: Instant,
        expires_in: Duration,
    ) -> Self {
        Self {
            run_id: ids.0,
            approval_id: ids.1,
            summary,
            card,
            shown_at: now,
            expires_at: now + expires_in,
            field: String::new(),
            hint: None,
        }
    }

    /// The field's answer on Enter; anything but y/yes/n/no (any case) clears the field and
    /// sets a hint.
    pub fn submit(&mut self) -> Option<Answer> {
        let answer = match self.field.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Some(Answer::Allow),
            "n" | "no" => Some(Answer::Deny),
            _ => None,
        };
        if answer.is_none() {
            let typed = self.field.trim();
            self.hint = Some(if typed.is_empty() {
                "please answer y or n".to_owned()
            } else {
                format!("{typed:?} is not an answer: please answer y or n")
            });
        }
        self.field.clear();
        answer
    }

    /// Whole seconds left at `now`, rounded up (0 once expired).
    pub fn seconds_left(&self, now: Instant) -> u64 {
        let left = self.expires_at.saturating_duration_since(now);
        left.as_millis().div_ceil(1000) as u64
    }

    /// Whether the request expired at `now`.
    pub fn expired(&self, now: Instant) -> bool {
        now >= self.expires_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dialog(now: Instant) -> Dialog {
        let ids = ("r".to_owned(), "a".to_owned());
        Dialog::new(
            ids,
            "shell ls".to_owned(),
            None,
            now,
            Duration::from_secs(60),
        )
    }

    #[test]
    fn only_yes_or_no_answers() {
        let mut d = dialog(Instant::now());
        d.field = "maybe".to_owned();
        assert_eq!(d.submit(), None);
        assert!(d.hint.as_deref().unwrap().contains("please answer y or n"));
        assert_eq!(d.submit(), None, "an empty answer asks again");
        d.field = " YES ".to_owned();
        assert_eq!(d.submit(), Some(Answer::Allow));
        d.field = "No".to_owned();
        assert_eq!(d.submit(), Some(Answer::Deny));
    }

    #[test]
    fn the_countdown_rounds_up_and_ends() {
        let t = Instant::now();
        let d = dialog(t);
        assert_eq!(d.seconds_left(t), 60);
        assert_eq!(d.seconds_left(t + Duration::from_millis(59_001)), 1);
        assert!(!d.expired(t + Duration::from_millis(59_999)));
        assert!(d.expired(t + Duration::from_secs(60)));
        assert_eq!(d.seconds_left(t + Duration::from_secs(61)), 0);
    }
}
