//! Parameter bundles: `#[nki_object]` structs of an `#[nki_module]`, built with
//! a struct literal and read field by field.

use super::*;

impl Checker<'_> {
    fn fields_of(&self, name: &str) -> Option<&[(String, Ty)]> {
        self.objects.iter().find(|(n, _, _)| n == name).map(|(_, f, _)| f.as_slice())
    }

    /// `base.name`: a field of a bundle.
    pub(super) fn bundle_field(&mut self, base: &Ty, name: &syn::Ident) -> Ty {
        let n = name.to_string();
        match base {
            Ty::Object(o) => {
                let Some(fields) = self.fields_of(o) else { return Ty::Unknown };
                match fields.iter().find(|(f, _)| *f == n) {
                    Some((_, t)) => {
                        let t = t.clone();
                        self.fresh(t)
                    }
                    None => {
                        let names: Vec<&str> = fields.iter().map(|(f, _)| f.as_str()).collect();
                        let hint = did_you_mean(&n, names.iter().copied()).map(|s| format!("; did you mean `{s}`?")).unwrap_or_default();
                        self.diag.error(name.span(), format!("`{o}` has no field `{n}`; its fields are {}{hint}", names.join(", ")));
                        Ty::Unknown
                    }
                }
            }
            Ty::Unknown => Ty::Unknown,
            // Another function's bundle: its field is as unseen as the bundle.
            Ty::Opaque => Ty::Opaque,
            other => {
                self.diag.error(
                    name.span(),
                    format!("`.{n}` reads a field of an #[nki_object] bundle, this is {}; tensor properties are methods: `.shape()`, `.dtype()`", other.describe()),
                );
                Ty::Unknown
            }
        }
    }

    /// `Name { field: value, .. }`: every field once, each value fitting its
    /// type; with `defaults` (`..Default::default()`) the fields not given
    /// take their declared defaults, which the bundle must declare for every
    /// field (its Rust `Default`).
    pub(super) fn bundle(&mut self, name: &syn::Ident, given: &[(syn::Ident, Expr)], defaults: bool, span: Spn) -> Ty {
        let o = name.to_string();
        let fields = self.fields_of(&o).map(<[_]>::to_vec).unwrap_or_default();
        let mut seen: Vec<String> = Vec::new();
        for (f, value) in given {
            let t = self.expr(value);
            let n = f.to_string();
            match fields.iter().find(|(x, _)| *x == n) {
                None => {
                    let names: Vec<&str> = fields.iter().map(|(x, _)| x.as_str()).collect();
                    self.diag.error(f.span(), format!("`{o}` has no field `{n}`; its fields are {}", names.join(", ")));
                }
                Some(_) if seen.contains(&n) => self.diag.error(f.span(), format!("field `{n}` is given twice")),
                Some((_, want)) if !t.fits(want) => {
                    self.diag.error(value.span, format!("field `{n}` of `{o}` holds {}, this is {}", want.describe(), t.describe()))
                }
                Some(_) => {}
            }
            seen.push(n);
        }
        let all_defaulted = self.objects.iter().any(|(n, _, d)| *n == o && *d);
        if defaults && !all_defaulted {
            self.diag
                .error(span, format!("`{o}` has a field without a #[default], so `..Default::default()` cannot fill it: give every field"));
        }
        let missing: Vec<&str> = fields.iter().map(|(x, _)| x.as_str()).filter(|x| !seen.iter().any(|s| s == x)).collect();
        if !missing.is_empty() && !defaults {
            self.diag.error(span, format!("`{o}` needs every field; missing: {}", missing.join(", ")));
        }
        Ty::Object(o)
    }
}
