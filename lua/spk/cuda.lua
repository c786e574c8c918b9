-- Placeholder: the cuda area installs nothing yet.
return function(spk, core) end
