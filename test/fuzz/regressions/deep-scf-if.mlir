func.func @deep(%c: i1) {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
scf.if %c {
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
  return
}
