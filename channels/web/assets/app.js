// Plain script, no build step. Each page's behaviour starts from an element it owns.
"use strict";
