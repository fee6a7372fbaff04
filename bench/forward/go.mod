module palisade.bench/forward

go 1.26
