mod cases;
mod endings;
mod props;
