//! Einsum's equation, parsed once for the verifier, shape inference, the FLOP count and
//! lowering.
//!
//! An equation is `term,term,...` or `term,term,...->output`, spaces ignored; a term is letters
//! (`a`-`z`, `A`-`Z`), each naming one dim, and at most one ellipsis `...` standing for the
//! dims the letters do not name. [`Einsum::parse`] numbers the labels: the ellipsis dims first
//! (right-aligned across the operands, as numpy broadcasts them), then the letters in order of
//! first appearance. Without `->` the output is the ellipsis dims followed by the letters that
//! occur exactly once, in alphabetical (ASCII) order, as numpy (ONNX's reference) does. A label
//! repeated within one term reads that operand's diagonal; a label absent from the output is
//! summed over.
//!
//! Guarantees: `parse` never panics; it rejects a term count that differs from the operand
//! count, a term whose dims do not match its operand's rank, an output label no input has, a
//! label repeated in the output and any other character, each with a sentence naming it.
//! [`Einsum::label_dims`] broadcasts each label's sizes (numpy rules: equal, or 1).

use super::OpCtx;
use crate::dim::broadcast_dim;
use crate::Dim;

/// A parsed equation over operands of known ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Einsum {
    /// Per operand, the label of each of its dims.
    pub inputs: Vec<Vec<usize>>,
    /// The labels of the output's dims, in order.
    pub output: Vec<usize>,
    /// How many labels there are (ellipsis dims included).
    pub n_labels: usize,
    /// The spelling of each label, for messages (`...` for ellipsis dims).
    names: Vec<String>,
}

/// One item of a term.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Item {
    Letter(char),
    Ellipsis,
}

/// The items of one term; `Err` on a character that is neither a letter nor part of `...`,
/// or on a second ellipsis.
fn items(term: &str, what: &str) -> Result<Vec<Item>, String> {
    let mut out = Vec::new();
    let mut rest = term;
    while let Some(c) = rest.chars().next() {
        if c.is_ascii_alphabetic() {
            out.push(Item::Letter(c));
            rest = &rest[1..];
        } else if let Some(after) = rest.strip_prefix("...") {
            if out.contains(&Item::Ellipsis) {
                return Err(format!("{what} `{term}` has more than one ellipsis"));
            }
            out.push(Item::Ellipsis);
            rest = after;
        } else {
            return Err(format!(
                "{what} `{term}` has `{c}`, which is neither a letter nor part of `...`"
            ));
        }
    }
    Ok(out)
}

impl Einsum {
    /// Parses `equation` for operands of ranks `ranks` (see the module doc).
    pub fn parse(equation: &str, ranks: &[usize]) -> Result<Einsum, String> {
        let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = match eq.split_once("->") {
            Some((_, r)) if r.contains("->") => {
                return Err(format!("the equation `{equation}` has more than one `->`"))
            }
            Some((l, r)) => (l, Some(r)),
            None => (eq.as_str(), None),
        };
        let terms: Vec<&str> = lhs.split(',').collect();
        if terms.len() != ranks.len() {
            return Err(format!(
                "the equation `{equation}` has {} input term(s) but the op has {} operand(s)",
                terms.len(),
                ranks.len()
            ));
        }
        let parsed: Vec<Vec<Item>> = terms
            .iter()
            .enumerate()
            .map(|(i, t)| items(t, &format!("input term #{i}")))
            .collect::<Result<_, _>>()?;
        // How many dims each operand's ellipsis stands for.
        let mut ellipsis_ranks = Vec::with_capacity(ranks.len());
        for (i, (items, &rank)) in parsed.iter().zip(ranks).enumerate() {
            let n_letters = items.iter().filter(|&&it| it != Item::Ellipsis).count();
            let has_ellipsis = items.contains(&Item::Ellipsis);
            let fits = if has_ellipsis {
                n_letters <= rank
            } else {
                n_letters == rank
            };
            if !fits {
                return Err(format!(
                    "input term #{i} `{}` names {n_letters} dim(s) but operand #{i} has rank {rank}",
                    terms[i]
                ));
            }
            ellipsis_ranks.push(if has_ellipsis { rank - n_letters } else { 0 });
        }
        let n_ellipsis = ellipsis_ranks.iter().copied().max().unwrap_or(0);
        let mut names: Vec<String> = vec!["...".to_string(); n_ellipsis];
        let mut letters: Vec<char> = Vec::new();
        let mut counts: Vec<usize> = Vec::new();
        let mut label_of = |c: char, names: &mut Vec<String>| -> usize {
            match letters.iter().position(|&l| l == c) {
                Some(p) => {
                    counts[p] += 1;
                    n_ellipsis + p
                }
                None => {
                    letters.push(c);
                    counts.push(1);
                    names.push(c.to_string());
                    n_ellipsis + letters.len() - 1
                }
            }
        };
        let mut inputs = Vec::with_capacity(parsed.len());
        for (items, &e) in parsed.iter().zip(&ellipsis_ranks) {
            let mut labels = Vec::new();
            for &item in items {
                match item {
                    Item::Letter(c) => labels.push(label_of(c, &mut names)),
                    Item::Ellipsis => labels.extend(n_ellipsis - e..n_ellipsis),
                }
            }
            inputs.push(labels);
        }
        let output = match rhs {
            Some(out) => {
                let mut labels = Vec::new();
                for item in items(out, "the output")? {
                    match item {
                        Item::Letter(c) => {
                            let Some(p) = letters.iter().position(|&l| l == c) else {
                                return Err(format!("the output label `{c}` is in no input term"));
                            };
                            if labels.contains(&(n_ellipsis + p)) {
                                return Err(format!("the output names label `{c}` twice"));
                            }
                            labels.push(n_ellipsis + p);
                        }
                        Item::Ellipsis => labels.extend(0..n_ellipsis),
                    }
                }
                labels
            }
            None => {
                let mut once: Vec<(char, usize)> = letters
                    .iter()
                    .zip(&counts)
                    .enumerate()
                    .filter(|(_, (_, &n))| n == 1)
                    .map(|(p, (&c, _))| (c, n_ellipsis + p))
                    .collect();
                once.sort();
                (0..n_ellipsis)
                    .chain(once.into_iter().map(|(_, l)| l))
                    .collect()
            }
        };
        Ok(Einsum {
            inputs,
            output,
            n_labels: names.len(),
            names,
        })
    }

    /// The equation of an `onnx.Einsum` op, parsed for its operands' ranks.
    pub fn of(ctx: &OpCtx) -> Result<Einsum, String> {
        let equation = ctx
            .str_attr("equation")
            .ok_or("requires the string attribute `equation`")?;
        let ranks: Vec<usize> = (0..ctx.n_operands())
            .map(|i| {
                ctx.operand_type(i)
                    .map(|t| t.rank())
                    .ok_or_else(|| format!("operand #{i} is missing"))
            })
            .collect::<Result<_, _>>()?;
        Einsum::parse(equation, &ranks)
    }

    /// The size of each label: its dims across the operands broadcast (equal, or 1).
    /// `operands` holds each operand's dims, in the ranks the equation was parsed for.
    pub fn label_dims(&self, operands: &[&[Dim]]) -> Result<Vec<Dim>, String> {
        let mut dims = vec![Dim::Static(1); self.n_labels];
        for (labels, operand) in self.inputs.iter().zip(operands) {
            for (&label, dim) in labels.iter().zip(operand.iter()) {
                dims[label] = broadcast_dim(&dims[label], dim).map_err(|e| {
                    format!("label `{}` has sizes that differ: {e}", self.names[label])
                })?;
            }
        }
        Ok(dims)
    }

    /// The labels summed over: those not in the output, in label order.
    pub fn summed(&self) -> Vec<usize> {
        (0..self.n_labels)
            .filter(|l| !self.output.contains(l))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implicit_output_is_the_letters_seen_once_sorted() {
        let e = Einsum::parse("ji,jk", &[2, 2]).unwrap();
        // Labels: j=0, i=1, k=2; output i k.
        assert_eq!(e.inputs, vec![vec![0, 1], vec![0, 2]]);
        assert_eq!(e.output, vec![1, 2]);
        assert_eq!(e.summed(), vec![0]);
    }

    #[test]
    fn ellipsis_dims_align_right_and_lead_the_output() {
        let e = Einsum::parse("...ii ->...i", &[3]).unwrap();
        assert_eq!(e.inputs, vec![vec![0, 1, 1]]);
        assert_eq!(e.output, vec![0, 1]);
        let e = Einsum::parse("...i,i", &[3, 1]).unwrap();
        assert_eq!(e.inputs, vec![vec![0, 1, 2], vec![2]]);
        assert_eq!(e.output, vec![0, 1]);
    }

    #[test]
    fn scalar_and_inner_product() {
        let e = Einsum::parse("->", &[0]).unwrap();
        assert_eq!(e.output, Vec::<usize>::new());
        let e = Einsum::parse("i,i", &[1, 1]).unwrap();
        assert_eq!(e.output, Vec::<usize>::new());
        assert_eq!(e.summed(), vec![0]);
    }

    #[test]
    fn bad_equations_say_what_is_wrong() {
        let err = |eq: &str, ranks: &[usize]| Einsum::parse(eq, ranks).unwrap_err();
        assert!(err("ij,jk", &[2]).contains("2 input term(s)"));
        assert!(err("ij->k", &[2]).contains("`k` is in no input"));
        assert!(err("ij->ii", &[2]).contains("twice"));
        assert!(err("i1", &[2]).contains("`1`"));
        assert!(err("ijk", &[2]).contains("rank 2"));
        assert!(err("i->i->i", &[1]).contains("more than one `->`"));
        assert!(err("......", &[1]).contains("more than one ellipsis"));
        let e = Einsum::parse("ij,jk", &[2, 2]).unwrap();
        let (a, b) = (
            [Dim::Static(2), Dim::Static(3)],
            [Dim::Static(4), Dim::Static(5)],
        );
        assert!(e.label_dims(&[&a, &b]).unwrap_err().contains("label `j`"));
    }
}
