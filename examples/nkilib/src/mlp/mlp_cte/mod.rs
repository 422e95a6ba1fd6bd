//! The context-encoding path of `mlp`: the library's `mlp_cte` folder.
