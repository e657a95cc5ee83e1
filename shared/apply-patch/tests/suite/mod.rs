mod cases;
mod props;
