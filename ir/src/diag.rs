//! Diagnostics: errors with a location, rendered with ariadne.
//!
//! A [`Diagnostic`] carries a message, an optional byte [`Span`] into the source text with a
//! label, and notes. [`Diagnostic::render`] draws it the way compilers do: file, line, column,
//! the source line and a label under the offending text. Without a span (IR built in memory)
//! the message and notes are printed alone.

use std::fmt;
use std::ops::Range;

/// A half-open byte range into a source text.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Span {
            start: clamp(start),
            end: clamp(end.max(start)),
        }
    }

    pub fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    /// The smallest span that covers both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// How bad a diagnostic is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// An error or warning with an optional location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub span: Option<Span>,
    /// Text shown under the span.
    pub label: String,
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span: None,
            label: String::new(),
            notes: Vec::new(),
        }
    }

    pub fn with_span(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.span = Some(span);
        self.label = label.into();
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// Renders with file name, line, column and the source line. `color` adds ANSI colors.
    pub fn render(&self, file_name: &str, source: &str, color: bool) -> String {
        use ariadne::{Config, IndexType, Label, Report, ReportKind, Source};
        let kind = match self.severity {
            Severity::Error => ReportKind::Error,
            Severity::Warning => ReportKind::Warning,
        };
        let config = Config::default()
            .with_color(color)
            .with_index_type(IndexType::Byte);
        let Some(span) = self.span else {
            return self.render_plain(file_name);
        };
        // Clamp the span into the source and onto char boundaries so ariadne always gets a
        // valid range, whatever produced the span.
        let mut start = (span.start as usize).min(source.len());
        let mut end = (span.end as usize).clamp(start, source.len());
        while !source.is_char_boundary(start) {
            start -= 1;
        }
        while !source.is_char_boundary(end) {
            end += 1;
        }
        let mut report = Report::build(kind, (file_name, start..end))
            .with_config(config)
            .with_message(&self.message)
            .with_label(Label::new((file_name, start..end)).with_message(&self.label));
        for note in &self.notes {
            report = report.with_note(note);
        }
        let mut out = Vec::new();
        let written = report
            .finish()
            .write((file_name, Source::from(source)), &mut out);
        match written {
            Ok(()) => String::from_utf8_lossy(&out).into_owned(),
            Err(_) => self.render_plain(file_name),
        }
    }

    fn render_plain(&self, file_name: &str) -> String {
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut out = format!("{kind}: {}\n  in {file_name}\n", self.message);
        if !self.label.is_empty() {
            out.push_str(&format!("  {}\n", self.label));
        }
        for note in &self.notes {
            out.push_str(&format!("  note: {note}\n"));
        }
        out
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if !self.label.is_empty() {
            write!(f, ": {}", self.label)?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}
