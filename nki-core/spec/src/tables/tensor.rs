//! `nki.language.NkiTensor`: methods and properties of tensors and views.

use super::prelude::*;

/// The rows, by name.
pub static OPS: &[Op] = &[
    method!("ap", [req("pattern", Pattern), opt("offset", Int).defaults_to("None"), opt("scalar_offset", DynamicOffset).defaults_to("None"), opt("vector_offset", Tensor(Spaces::Sbuf)).defaults_to("None"), opt("indirect_dim", Int).defaults_to("0"), opt("dtype", Dtype).defaults_to("None")], summary: "a view from an explicit access pattern [[step, count], ...] and offsets (counted in elements of dtype)", status: METHOD),
    method!("broadcast", [req("dim", Int), req("size", Int)], summary: "a view repeating a size-1 dim", status: METHOD),
    method!("dtype", [], summary: "the dtype (property)", status: PROPERTY),
    method!("expand_dim", [req("dim", Int)], summary: "a view with a new size-1 dim", status: METHOD),
    method!("flatten_dims", [req("start_dim", Int), req("end_dim", Int)], summary: "a view merging a range of dims", status: METHOD),
    method!("get_pattern", [], summary: "the view's access pattern", status: METHOD),
    method!("indirect", [req("index", Tensor(Spaces::Sbuf)), opt("num_elem", Int).defaults_to("None")], summary: "a (P, num_elem) view whose column i is free element index[i % 16, i // 16] of each partition (tensor indirection)", generations: TRN3_ONLY, status: METHOD),
    method!("is_contiguous", [], summary: "whether the view is contiguous", status: METHOD),
    method!("is_indirect", [], summary: "whether the view is indexed indirectly", status: METHOD),
    method!("ndim", [], summary: "the number of dims (property)", status: PROPERTY),
    method!("permute", [req("dims", Ints)], summary: "a view with its dims reordered", status: METHOD),
    method!("rearrange", [req("src_pattern", Names), req("dst_pattern", Names), opt("fixed_sizes", Sizes).defaults_to("None")], summary: "a view rearranged by einops-style patterns", status: METHOD),
    method!("reinterpret_cast", [req("dtype", Dtype)], summary: "the same bytes reinterpreted as another dtype (an alias of view)", status: METHOD),
    method!("reshape", [req("shape", Ints)], summary: "a view with a new shape", status: METHOD),
    method!("reshape_dim", [req("dim", Int), req("shape", Ints)], summary: "a view splitting one dim into a shape", status: METHOD),
    method!("select", [req("dim", Int), req("index", Int)], summary: "a view fixing one dim at an index", status: METHOD),
    method!("shape", [], summary: "the shape (property)", status: PROPERTY),
    method!("slice", [req("dim", Int), req("start", Int), req("end", Int), opt("step", Int).defaults_to("1")], summary: "a view of a range of one dim", status: METHOD),
    method!("squeeze_dim", [req("dim", Int)], summary: "a view without a size-1 dim", status: METHOD),
    method!("vector_select", [req("dim", Int), req("vector_offset", Tensor(Spaces::Sbuf))], summary: "a view choosing, per partition, an index of a dim from a tensor", status: METHOD),
    method!("view", [req("dtype", Dtype)], summary: "the same bytes reinterpreted as another dtype", status: METHOD),
];
