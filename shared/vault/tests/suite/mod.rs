mod python;
