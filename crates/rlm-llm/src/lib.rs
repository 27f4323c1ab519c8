//! Model providers behind one trait (see issue: the model layer).
