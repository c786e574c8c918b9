-- Placeholder: the lstm area installs nothing yet.
return function(spk, core) end
