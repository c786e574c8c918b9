-- Placeholder: the tensor area installs nothing yet.
return function(spk, core) end
