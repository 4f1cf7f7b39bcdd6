//! The drawing primitives every chart uses: a canvas that writes SVG by hand, and
//! measures each label it places, so that charts lay labels out by their width.
//!
//! Text width is estimated, not measured from a font: [`CHAR_EM`] of the font size
//! per character, which is at least the mean advance of the common sans-serif fonts
//! (DejaVu Sans, Helvetica, Liberation Sans) on digits, letters and punctuation. An
//! estimate that errs wide keeps labels apart in any of them.

use std::fmt::Write as _;

/// Estimated advance of one character, as a share of the font size.
pub const CHAR_EM: f64 = 0.62;
/// Height of a label's box, as a share of the font size (ascent plus descent).
pub const LINE_EM: f64 = 1.2;
/// Share of the font size above the baseline.
const ASCENT_EM: f64 = 0.9;

/// One colour per server, in the order the servers were given.
pub const COLORS: &[&str] = &[
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
];
/// The floors' colour: grey, so that the servers stand out.
pub const FLOOR_COLOR: &str = "#9d9d9d";

/// Where a label's `x` is: its start, its middle or its end.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn svg(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }

    /// Parses SVG's `text-anchor` (absent means start).
    #[cfg(test)]
    pub fn parse(s: Option<&str>) -> Anchor {
        match s {
            Some("middle") => Anchor::Middle,
            Some("end") => Anchor::End,
            _ => Anchor::Start,
        }
    }
}

/// A label's box: left, top, width, height.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TextBox {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl TextBox {
    /// The box of `text` at font `size` drawn at (`x`, baseline `y`) with `anchor`.
    pub fn of(text: &str, size: f64, x: f64, y: f64, anchor: Anchor) -> TextBox {
        let w = text_width(text, size);
        let left = match anchor {
            Anchor::Start => x,
            Anchor::Middle => x - w / 2.0,
            Anchor::End => x - w,
        };
        TextBox {
            x: left,
            y: y - ASCENT_EM * size,
            w,
            h: LINE_EM * size,
        }
    }

    /// Whether the two boxes share any area (touching edges do not overlap).
    pub fn overlaps(&self, o: &TextBox) -> bool {
        self.x < o.x + o.w && o.x < self.x + self.w && self.y < o.y + o.h && o.y < self.y + self.h
    }

    /// Whether the box lies inside a `w` by `h` canvas.
    #[cfg(test)]
    pub fn inside(&self, w: f64, h: f64) -> bool {
        self.x >= 0.0 && self.y >= 0.0 && self.x + self.w <= w && self.y + self.h <= h
    }
}

/// Estimated width of `text` at font `size`.
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * CHAR_EM * size
}

/// Escapes text for SVG.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An SVG document being drawn; its size is fixed when it is finished.
#[derive(Default)]
pub struct Canvas {
    body: String,
    /// Every label placed so far, for charts that check a place is free.
    pub labels: Vec<TextBox>,
}

impl Canvas {
    pub fn new() -> Canvas {
        Canvas::default()
    }

    /// A label; `class` (may be empty) names its role for readers of the SVG.
    #[allow(clippy::too_many_arguments)]
    pub fn text(
        &mut self,
        x: f64,
        y: f64,
        size: f64,
        anchor: Anchor,
        class: &str,
        bold: bool,
        text: &str,
    ) -> TextBox {
        let b = TextBox::of(text, size, x, y, anchor);
        let _ = write!(
            self.body,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{}\"",
            anchor.svg()
        );
        if !class.is_empty() {
            let _ = write!(self.body, " class=\"{}\"", esc(class));
        }
        if bold {
            self.body.push_str(" font-weight=\"bold\"");
        }
        let _ = write!(self.body, ">{}</text>", esc(text));
        self.labels.push(b);
        b
    }

    /// Whether a label with box `b` would overlap none placed so far.
    pub fn free(&self, b: &TextBox) -> bool {
        self.labels.iter().all(|l| !l.overlaps(b))
    }

    /// A filled rectangle with a tooltip (`title`, may be empty).
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, title: &str) {
        let _ = write!(
            self.body,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\"",
            w.max(0.0),
            h.max(0.0)
        );
        if title.is_empty() {
            self.body.push_str("/>");
        } else {
            let _ = write!(self.body, "><title>{}</title></rect>", esc(title));
        }
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, dashed: bool) {
        let _ = write!(
            self.body,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\""
        );
        if dashed {
            self.body.push_str(" stroke-dasharray=\"4 3\"");
        }
        self.body.push_str("/>");
    }

    /// One series of a line chart, or its legend swatch (`class` says which): a
    /// polyline through `points` named `name` (its `<title>`, a tooltip), `width`
    /// pixels wide, solid or dashed, with a dot at each point when `dots`.
    #[allow(clippy::too_many_arguments)]
    pub fn series(
        &mut self,
        class: &str,
        name: &str,
        points: &[(f64, f64)],
        stroke: &str,
        width: f64,
        dashed: bool,
        dots: bool,
    ) {
        let pts: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = write!(
            self.body,
            "<polyline class=\"{class}\" points=\"{}\" fill=\"none\" stroke=\"{stroke}\" \
             stroke-width=\"{width}\"",
            pts.join(" ")
        );
        if dashed {
            self.body.push_str(" stroke-dasharray=\"6 4\"");
        }
        let _ = write!(self.body, "><title>{}</title></polyline>", esc(name));
        if dots {
            for (x, y) in points {
                let _ = write!(
                    self.body,
                    "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"{stroke}\"/>"
                );
            }
        }
    }

    /// The finished document, `w` by `h`, on white.
    pub fn finish(self, w: f64, h: f64) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" \
             viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\
             <rect width=\"100%\" height=\"100%\" fill=\"white\"/>{}</svg>\n",
            self.body
        )
    }
}
